// Real short trainings through RunManager with forked engine processes: the whole lifecycle,
// supervision of a killed engine, exact resume from a checkpoint, controls, queueing and bad input.
import { copyFileSync, existsSync } from 'node:fs'
import { dirname, join } from 'node:path'

import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'

import type { RunConfig } from '../../main/api/config'
import type { RunSpec } from '../../main/api/contract'
import { buildEngineWorker, type BuiltWorker } from './helpers/engine-build'
import { tinyConfig, writeCorpusShard, writeTokenShard } from './helpers/engine-fixtures'
import { createEngineHarness, type EngineHarness } from './helpers/engine-harness'

let worker: BuiltWorker
let h: EngineHarness
let shard: string

beforeAll(async () => {
  worker = await buildEngineWorker()
})
afterAll(() => worker?.dispose())
afterEach(() => h?.close())

function setUp(concurrency = 1): EngineHarness {
  h = createEngineHarness(worker.entry, { concurrency })
  shard = writeCorpusShard(join(h.dir, 'corpus.bin'))
  return h
}

const spec = (name: string, config: RunConfig, dataset = shard): RunSpec => ({ name, config, dataset: { path: dataset } })
const losses = (id: string) => h.store.series(id, ['loss'], { maxPoints: 2000 })

describe('RunManager with forked engine processes', () => {
  it('trains a run to the end, recording steps, checkpoints, events and live steps', async () => {
    setUp()
    const created = h.manager.create(spec('Tiny Mixtral', tinyConfig({ steps: 12, checkpoint_every: 5 })))
    expect(created.id).toMatch(/^tiny-mixtral-[a-z0-9]{6}$/)
    const done = await h.waitForStatus(created.id, 'finished')

    expect(done).toMatchObject({ step: 12, totalSteps: 12, error: null })
    expect(Number.isFinite(done.lastLoss)).toBe(true)
    expect(done.finishedAt).toBeGreaterThanOrEqual(done.startedAt as number)
    expect(losses(created.id).step).toEqual(Array.from({ length: 12 }, (_, i) => i + 1))
    expect(h.store.listCheckpoints(created.id).map((c) => c.step)).toEqual([5, 10, 12])
    expect(h.events(created.id).map((e) => e.kind)).toEqual([
      'queued', 'started', 'checkpoint', 'checkpoint', 'checkpoint', 'finished',
    ])
    // The start event carries the backend's own description: its threads and kernels.
    expect(h.events(created.id).find((e) => e.kind === 'started')?.message).toMatch(/ · cpu \(\d+ threads?[ ;].*sgemm /)
    expect(h.statuses(created.id)).toEqual(['queued', 'running', 'finished'])
    const live = h.liveSteps(created.id)
    expect(live.at(-1)?.metrics.step).toBe(12)
    expect(live.at(-1)?.expertTokens).toHaveLength(2)
    expect(live.at(-1)?.expertTokens[0]).toHaveLength(4)
  })

  it('keeps the newest train.keep_checkpoints checkpoints on disk and in the run record', async () => {
    setUp()
    const id = h.manager.create(spec('kept', tinyConfig({ steps: 8, checkpoint_every: 2, keep_checkpoints: 2 }))).id
    await h.waitForStatus(id, 'finished')
    const kept = h.store.listCheckpoints(id)
    expect(kept.map((c) => c.step)).toEqual([6, 8])
    for (const c of kept) expect(existsSync(join(c.path, 'trainer_state.json'))).toBe(true)
    for (const step of [2, 4]) expect(existsSync(join(dirname(kept[0]!.path), `checkpoint-${step}`))).toBe(false)
    expect(h.events(id).filter((e) => e.kind === 'checkpoint')).toHaveLength(4)  // each save is still said
  })

  it('holds out the end of a text file and records the held-out loss on the steps that evaluate', async () => {
    setUp()
    const text = join(h.dir, 'corpus.txt')
    copyFileSync(new URL('../../resources/corpus/python-tutorial.txt', import.meta.url), text)
    const id = h.manager.create({ name: 'evaluated', config: tinyConfig({ steps: 6, eval_every: 3, eval_batches: 2 }), dataset: { path: text, eval: { fraction: 0.1 } } }).id
    await h.waitForStatus(id, 'finished')
    const series = h.store.series(id, ['eval_loss'], { maxPoints: 2000 })
    expect(series.step).toEqual([1, 2, 3, 4, 5, 6])
    const evals = series.values.eval_loss!.map((v) => v !== null && Number.isFinite(v))
    expect(evals).toEqual([false, false, true, false, false, true])
  })

  it('fails a killed engine with the reason, keeps going, and a restart reproduces the uninterrupted losses', async () => {
    setUp()
    const config = tinyConfig({ steps: 16, checkpoint_every: 4 })
    const victim = h.manager.create(spec('victim', config)).id
    const reference = h.manager.create(spec('reference', config)).id
    expect(h.store.getRun(reference)?.status).toBe('queued')

    await h.waitFor('a checkpoint after step 4', () => h.store.listCheckpoints(victim).some((c) => c.step >= 8))
    h.ports.get(victim)?.kill('SIGKILL')
    const failed = await h.waitForStatus(victim, 'failed')
    expect(failed.error).toMatch(/^engine process killed by SIGKILL at step \d+$/)
    expect(h.events(victim).at(-1)).toMatchObject({ kind: 'failed', message: failed.error })

    await h.waitForStatus(reference, 'finished')
    const latest = h.store.listCheckpoints(victim).at(-1)?.step as number
    expect(h.manager.restart(victim).status).toMatch(/queued|running/)
    expect(h.store.getRun(victim)?.step).toBe(latest)
    await h.waitForStatus(victim, 'finished')

    expect(h.events(victim).find((e) => e.message === `restart from the checkpoint at step ${latest}`)).toBeDefined()
    const resumed = losses(victim)
    expect(resumed.step).toHaveLength(16)
    expect(resumed.values.loss).toEqual(losses(reference).values.loss)
  })

  it('pauses, checkpoints while paused, resumes and stops with a final checkpoint', async () => {
    setUp()
    const id = h.manager.create(spec('controls', tinyConfig({ steps: 100_000 }))).id
    await h.waitFor('step 3', () => (h.store.getRun(id)?.step ?? 0) >= 3)
    h.manager.pause(id)
    expect(h.store.getRun(id)?.status).toBe('paused')
    // Paused at a step boundary: the stored step stops moving.
    let pausedAt = -1
    let since = Date.now()
    await h.waitFor('no progress for 300 ms', () => {
      const step = h.store.getRun(id)?.step ?? 0
      if (step !== pausedAt) [pausedAt, since] = [step, Date.now()]
      return Date.now() - since >= 300
    })
    h.manager.requestCheckpoint(id)
    await h.waitFor('a checkpoint while paused', () => h.events(id).some((e) => e.kind === 'checkpoint'))
    expect(h.store.listCheckpoints(id).map((c) => c.step)).toEqual([pausedAt])
    expect(h.store.getRun(id)?.step).toBe(pausedAt)

    h.manager.resume(id)
    await h.waitFor('progress after resume', () => (h.store.getRun(id)?.step ?? 0) > pausedAt + 2)
    h.manager.stop(id)
    const stopped = await h.waitForStatus(id, 'stopped')
    expect(stopped.error).toBeNull()
    expect(h.store.listCheckpoints(id).at(-1)?.step).toBe(stopped.step)
    expect(h.statuses(id)).toEqual(['queued', 'running', 'paused', 'running', 'stopping', 'stopped'])
    expect(h.events(id).map((e) => e.kind)).toEqual([
      'queued', 'started', 'paused', 'checkpoint', 'resumed', 'checkpoint', 'stopped',
    ])
  })

  it('runs a queue one at a time; a queued run can be stopped and a run deleted', async () => {
    setUp()
    const first = h.manager.create(spec('first', tinyConfig({ steps: 6 }))).id
    const second = h.manager.create(spec('second', tinyConfig({ steps: 6 }))).id
    const third = h.manager.create(spec('third', tinyConfig({ steps: 6 }))).id
    h.manager.stop(third)
    expect(h.store.getRun(third)).toMatchObject({ status: 'stopped', startedAt: null })

    const a = await h.waitForStatus(first, 'finished')
    const b = await h.waitForStatus(second, 'finished')
    expect(b.startedAt).toBeGreaterThanOrEqual(a.finishedAt as number)
    expect(h.statuses(second).slice(0, 2)).toEqual(['queued', 'running'])

    const runDir = h.store.getRun(first)?.runDir as string
    expect(existsSync(runDir)).toBe(true)
    await h.manager.delete(first)
    expect(h.store.getRun(first)).toBeUndefined()
    expect(existsSync(runDir)).toBe(false)
  })

  it('fails a run on bad data or config with a message naming the file or field, writing nothing', async () => {
    setUp(2)
    const missing = join(h.dir, 'missing.txt')
    const tiny = writeTokenShard(join(h.dir, 'tiny.bin'), Array.from({ length: 50 }, (_, i) => i))
    const noFile = h.manager.create(spec('no file', tinyConfig(), missing)).id
    const tooSmall = h.manager.create(spec('too small', tinyConfig(), tiny)).id

    expect((await h.waitForStatus(noFile, 'failed')).error).toContain(missing)
    const small = await h.waitForStatus(tooSmall, 'failed')
    expect(small.error).toContain('train.batch_size')
    expect(small.error).toContain(tiny)
    for (const id of [noFile, tooSmall]) expect(existsSync(h.store.getRun(id)?.runDir as string)).toBe(false)
    expect(() => h.manager.pause(tooSmall)).toThrow(/only a running run can be paused/)
  })
})
