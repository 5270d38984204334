// Which host process drives a run: while a host has a run queued or active, its pid is in
// `.<run id>.host` beside the run directory (which may not exist yet). A second host on the same data
// (the CLI beside the app or `serve`) then never mistakes another host's live run for an orphan.
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { basename, dirname, join } from 'node:path'

const ownerFile = (runDir: string) => join(dirname(runDir), `.${basename(runDir)}.host`)

export function claimRun(runDir: string): void {
  mkdirSync(dirname(runDir), { recursive: true })
  writeFileSync(ownerFile(runDir), String(process.pid))
}

export function releaseRun(runDir: string): void {
  rmSync(ownerFile(runDir), { force: true })
}

export function ownedByAnotherLiveHost(runDir: string): boolean {
  let pid: number
  try {
    pid = Number(readFileSync(ownerFile(runDir), 'utf8'))
  } catch {
    return false
  }
  if (!Number.isSafeInteger(pid) || pid <= 0 || pid === process.pid) return false
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM'  // alive, but not ours to signal
  }
}
