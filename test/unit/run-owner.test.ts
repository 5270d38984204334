// The owner file beside a run directory: who drives the run, and whether that host still answers.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { hostname, tmpdir } from 'node:os'
import { join } from 'node:path'

import { afterEach, describe, expect, it } from 'vitest'

import { claimRun, heartbeat, ownedByAnotherLiveHost, ownerOf, releaseRun } from '../../main/host/runs/run-owner'

const dirs: string[] = []
afterEach(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })))

function runDir(): { runDir: string; file: string } {
  const dir = mkdtempSync(join(tmpdir(), 'run-owner-'))
  dirs.push(dir)
  mkdirSync(join(dir, 'runs'))
  return { runDir: join(dir, 'runs', 'r1'), file: join(dir, 'runs', '.r1.host') }
}

// A pid no process has: past the kernel's default pid_max.
const DEAD_PID = 4_194_304 + 12_345

describe('run owner', () => {
  it('records this host with a heartbeat, renews it, and releases it', () => {
    const { runDir: dir, file } = runDir()
    expect(ownerOf(dir, 1000)).toEqual({ state: 'none' })
    claimRun(dir, 1000)
    expect(JSON.parse(readFileSync(file, 'utf8'))).toEqual({ pid: process.pid, host: hostname(), beat: 1000 })
    expect(ownerOf(dir, 1000, 1_000_000)).toEqual({ state: 'self' })
    heartbeat(dir, 5000)
    expect(JSON.parse(readFileSync(file, 'utf8')).beat).toBe(5000)
    releaseRun(dir)
    expect(ownerOf(dir, 1000)).toEqual({ state: 'none' })
  })

  it('on this machine: a live pid is alive whatever its heartbeat, a dead one is gone at once', () => {
    const { runDir: dir, file } = runDir()
    writeFileSync(file, JSON.stringify({ pid: process.ppid, host: hostname(), beat: 0 }))
    expect(ownerOf(dir, 1000, 1e12).state).toBe('alive')
    expect(ownedByAnotherLiveHost(dir, 1000, 1e12)).toBe(true)
    writeFileSync(file, JSON.stringify({ pid: DEAD_PID, host: hostname(), beat: Date.now() }))
    expect(ownerOf(dir, 60_000)).toMatchObject({ state: 'gone', owner: { pid: DEAD_PID } })
  })

  it('on another machine: only the heartbeat tells, fresh is alive and stale is gone', () => {
    const { runDir: dir, file } = runDir()
    writeFileSync(file, JSON.stringify({ pid: process.pid, host: 'another-machine', beat: 10_000 }))
    expect(ownerOf(dir, 5000, 14_000).state).toBe('alive')
    expect(ownerOf(dir, 5000, 15_001)).toMatchObject({ state: 'gone', owner: { host: 'another-machine', beat: 10_000 } })
  })

  it('reads the bare pid older hosts wrote', () => {
    const { runDir: dir, file } = runDir()
    claimRun(dir)
    writeFileSync(file, String(process.ppid))
    expect(ownerOf(dir, 1000).state).toBe('alive')
    writeFileSync(file, String(DEAD_PID))
    expect(ownerOf(dir, 1000).state).toBe('gone')
  })
})
