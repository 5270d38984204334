// Two hosts on one data directory: a CLI `train` process drives a run while a second host (as `serve` or the
// app would be) is up. The second never touches the live host's run; once that host is killed with SIGKILL,
// it fails the run naming the host and the step, instead of leaving it "running" for ever.
import { spawn } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import { afterAll, beforeAll, describe, expect, it } from 'vitest'

import { createHost } from '../../main/host/host'
import { binPath, ensureBuilt, repoRoot } from './cli-build'

const ADDON = join(repoRoot, 'native', 'build-addon', 'Release', 'moe_engine_addon.node')
const dir = mkdtempSync(join(tmpdir(), 'moe-heartbeat-'))
const home = join(dir, 'home')
const configFile = join(dir, 'long.json')
writeFileSync(configFile, JSON.stringify({
  model: { arch: 'mixtral', vocab_size: 256, d_model: 32, n_layers: 2, n_heads: 2, max_seq_len: 32, d_ff: 32, n_experts: 4, top_k: 2 },
  train: { batch_size: 2, seq_len: 32, steps: 1_000_000, warmup_steps: 1, threads: 1 },
}))

beforeAll(() => ensureBuilt(), 180_000)
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms))

async function until<T>(what: string, probe: () => T | undefined, timeoutMs = 60_000): Promise<T> {
  const end = Date.now() + timeoutMs
  for (;;) {
    const value = probe()
    if (value !== undefined) return value
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await sleep(50)
  }
}

describe.runIf(existsSync(ADDON))('hosts watching each other', () => {
  it('leaves a live host’s run alone and fails it once that host is killed', async () => {
    const watcher = await createHost({ dataDir: home, heartbeatMs: 100, staleMs: 2_000 })
    const trainer = spawn(process.execPath, [binPath, 'train', '--config', configFile, '--name', 'heartbeat'], {
      cwd: dir, env: { ...process.env, MOE_WORKBENCH_HOME: home }, stdio: 'ignore',
    })
    const exited = new Promise((done) => trainer.once('exit', done))
    try {
      const run = await until('the CLI run to be training', () => {
        const r = watcher.store.listRuns().find((x) => x.name === 'heartbeat')
        return r && r.status === 'running' && r.step >= 2 ? r : undefined
      })
      await sleep(1_000) // ten looks at the run while its host is alive
      expect(watcher.store.getRun(run.id)?.status).toBe('running')

      trainer.kill('SIGKILL')
      await exited
      const failed = await until('the run to be failed', () => {
        const r = watcher.store.getRun(run.id)
        return r?.status === 'failed' ? r : undefined
      }, 10_000)
      expect(failed.error).toMatch(new RegExp(`^the host \\(pid ${trainer.pid} on .+\\) stopped answering at step \\d+; restart it`))
      const events = watcher.store.listEvents(run.id).map((e) => e.message)
      expect(events.at(-1)).toMatch(/stopped answering at step \d+$/)
    } finally {
      trainer.kill('SIGKILL')
      await watcher.close()
    }
  }, 120_000)
})
