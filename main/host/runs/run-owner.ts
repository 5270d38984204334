// Which host process drives a run: while a host has a run queued or active, `.<run id>.host` beside the
// run directory (which may not exist yet) names it — pid, machine — and carries its heartbeat, rewritten
// every few seconds. Another host on the same data (the CLI beside the app, `serve`, a second machine on a
// shared disk) then never mistakes a live host's run for an orphan, and notices one whose host died.
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { hostname } from 'node:os'
import { basename, dirname, join } from 'node:path'

const ownerFile = (runDir: string) => join(dirname(runDir), `.${basename(runDir)}.host`)

export interface OwnerRecord {
  pid: number
  /** The machine the host runs on; a pid means nothing on another one. */
  host: string
  /** Last heartbeat (ms since epoch); null in files written before heartbeats existed. */
  beat: number | null
}

/** What a run's owner file says of its host. */
export type RunOwner =
  | { state: 'none' }
  | { state: 'self' }
  | { state: 'alive'; owner: OwnerRecord }
  | { state: 'gone'; owner: OwnerRecord }

function writeOwner(runDir: string, now: number): void {
  mkdirSync(dirname(runDir), { recursive: true })
  const file = ownerFile(runDir)
  // Written aside and renamed: a reader sees the old record or the new one, never half of one.
  const temp = `${file}.${process.pid}.tmp`
  writeFileSync(temp, JSON.stringify({ pid: process.pid, host: hostname(), beat: now } satisfies OwnerRecord))
  renameSync(temp, file)
}

export function claimRun(runDir: string, now = Date.now()): void {
  writeOwner(runDir, now)
}

/** Renews this host's heartbeat on a run it owns. */
export function heartbeat(runDir: string, now = Date.now()): void {
  writeOwner(runDir, now)
}

export function releaseRun(runDir: string): void {
  rmSync(ownerFile(runDir), { force: true })
}

function readOwner(runDir: string): OwnerRecord | null {
  let text: string
  try {
    text = readFileSync(ownerFile(runDir), 'utf8')
  } catch {
    return null
  }
  // Older hosts wrote the bare pid.
  if (/^\s*\d+\s*$/.test(text)) return { pid: Number(text), host: hostname(), beat: null }
  try {
    const o = JSON.parse(text) as Partial<OwnerRecord>
    if (typeof o.pid !== 'number' || typeof o.host !== 'string') return null
    return { pid: o.pid, host: o.host, beat: typeof o.beat === 'number' ? o.beat : null }
  } catch {
    return null
  }
}

export function pidAlive(pid: number): boolean {
  if (!Number.isSafeInteger(pid) || pid <= 0) return false
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM' // alive, but not ours to signal
  }
}

/**
 * On this machine the pid answers at once: a dead process is gone, a live one is alive (its event loop may be
 * busy past a heartbeat). On another machine only the heartbeat can: older than staleMs, the host is gone.
 */
export function ownerOf(runDir: string, staleMs: number, now = Date.now()): RunOwner {
  const owner = readOwner(runDir)
  if (!owner) return { state: 'none' }
  const here = owner.host === hostname()
  if (here && owner.pid === process.pid) return { state: 'self' }
  if (here) return pidAlive(owner.pid) ? { state: 'alive', owner } : { state: 'gone', owner }
  const fresh = owner.beat !== null && now - owner.beat <= staleMs
  return fresh ? { state: 'alive', owner } : { state: 'gone', owner }
}

export function ownedByAnotherLiveHost(runDir: string, staleMs: number, now = Date.now()): boolean {
  return ownerOf(runDir, staleMs, now).state === 'alive'
}
