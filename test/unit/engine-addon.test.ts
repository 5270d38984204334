// The addon's Engine class under plain Node: errors carry the engine's message, training streams
// every step in order with bounded buffering, and pause/resume/stop/checkpoint act at step boundaries.
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'

import { afterAll, describe, expect, it } from 'vitest'

import { loadEngineAddon, type NativeEngine, type TrainOutcome } from '../../main/host/engine/addon'
import { decodeStepRecord, type EngineStepRecord } from '../../main/host/engine/step-record'
import { tinyConfig, writeCorpusShard, writeTokenShard } from '../integration/helpers/engine-fixtures'

const { Engine } = loadEngineAddon()
const dir = mkdtempSync(join(tmpdir(), 'engine-addon-'))
const shard = writeCorpusShard(join(dir, 'corpus.bin'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

// Small enough that the engine outruns a busy JS thread by far.
const microConfig = (steps: number) =>
  JSON.stringify(tinyConfig({ steps, batch_size: 2, seq_len: 8, threads: 1 }, { d_model: 16, d_ff: 32, max_seq_len: 8 }))

interface Outcome {
  status: TrainOutcome
  error?: string
  steps: number[]
  checkpoints: [number, string][]
}

function train(engine: NativeEngine, opts: { totalSteps?: number; onStep?: (step: number) => void } = {}): Promise<Outcome> {
  const steps: number[] = []
  const checkpoints: [number, string][] = []
  return new Promise((resolve) =>
    engine.start(
      { totalSteps: opts.totalSteps },
      (buf) => {
        const step = decodeStepRecord(buf).step
        steps.push(step)
        opts.onStep?.(step)
      },
      (step, ckptDir) => checkpoints.push([step, ckptDir]),
      (status, error) => resolve({ status, error, steps, checkpoints }),
    ),
  )
}

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i)
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
const busyWait = (ms: number) => {
  const until = Date.now() + ms
  while (Date.now() < until);
}

describe('Engine (addon)', () => {
  it('rejects a bad config with the engine message naming the field', () => {
    expect(() => new Engine(JSON.stringify(tinyConfig({}, { d_model: 64 })).replace('"d_model":64', '"d_model":-3'))).toThrow(
      /model\.d_model/,
    )
    expect(() => new Engine('{"model": ')).toThrow(/config/)
    expect(() => new Engine(42 as unknown as string)).toThrow(/configJson must be a string/)
  })

  it('describes itself and names the file when data is bad', () => {
    const engine = new Engine(JSON.stringify(tinyConfig()))
    expect(engine.backendName).toBe('cpu')
    expect(engine.backendDescription).toMatch(/^cpu \(\d+ threads?[ ;]/)
    expect(engine.numParams).toBeGreaterThan(100_000)
    expect(engine.stepCount).toBe(0)
    expect(engine.training).toBe(false)
    expect(JSON.parse(engine.configJson).model.d_model).toBe(64)
    const missing = join(dir, 'missing.bin')
    expect(() => engine.setData(missing)).toThrow(missing)
    const tooBig = writeTokenShard(join(dir, 'vocab.bin'), [1, 2, 300, 4], 0)
    expect(() => engine.setData(tooBig)).toThrow(/300/)
  })

  it('trains, streaming every step in order, with periodic and final checkpoints', async () => {
    const runDir = join(dir, 'finish')
    const engine = new Engine(JSON.stringify(tinyConfig({ steps: 7, checkpoint_every: 3 })), undefined, runDir)
    engine.setData(shard)
    const out = await train(engine)
    expect(out).toMatchObject({ status: 'finished', error: undefined, steps: range(1, 7) })
    expect(out.checkpoints).toEqual([3, 6, 7].map((s) => [s, join(runDir, `checkpoint-${s}`)]))
    expect(existsSync(join(runDir, 'checkpoint-7', 'trainer_state.json'))).toBe(true)
    expect(engine.training).toBe(false)
    expect(engine.stepCount).toBe(7)
  })

  it('streams the offload measurements, tiers and pins of an offloaded run (docs/offload.md)', async () => {
    const config = { ...tinyConfig({ steps: 3 }), offload: { mode: 'host', expert_slots: 4, pin_fraction: 0.25 } }
    const engine = new Engine(JSON.stringify(config), undefined, join(dir, 'offload'))
    engine.setData(shard)
    const records: EngineStepRecord[] = []
    const status = await new Promise<TrainOutcome>((resolve) =>
      engine.start({}, (buf) => records.push(decodeStepRecord(buf)), () => {}, (s) => resolve(s)),
    )
    expect(status).toBe('finished')
    expect(records.map((r) => r.step)).toEqual([1, 2, 3])
    const last = records[2]
    expect(last.bytes_h2d).toBeGreaterThan(0)
    expect(last.bytes_d2h).toBeGreaterThan(0)
    expect(last.peak_device_bytes).toBeGreaterThan(0)
    expect(last.tiers?.map((t) => Array.from(t))).toEqual([[1, 1, 1, 1], [1, 1, 1, 1]])
    expect(last.pins?.reduce((n, t) => n + Array.from(t).reduce((a, b) => a + b, 0), 0)).toBe(1)
  })

  it('blocks the engine thread while JS lags (bounded queue) and loses no record', async () => {
    const engine = new Engine(microConfig(400), undefined, join(dir, 'backpressure'))
    engine.setData(shard)
    let aheadWhileStalled = 0
    const out = await train(engine, {
      onStep: (step) => {
        if (step !== 1) return
        busyWait(1500)
        aheadWhileStalled = engine.stepCount
      },
    })
    expect(out.status).toBe('finished')
    expect(out.steps).toEqual(range(1, 400))
    // One step in JS, 64 queued, one waiting to be queued: the thread went no further.
    expect(aheadWhileStalled).toBeGreaterThan(1)
    expect(aheadWhileStalled).toBeLessThanOrEqual(67)
  })

  it('pauses, checkpoints while paused, resumes and stops at step boundaries', async () => {
    const runDir = join(dir, 'control')
    const engine = new Engine(microConfig(100_000), undefined, runDir)
    engine.setData(shard)
    let pausedAt = -1
    const done = train(engine, {
      onStep: (step) => {
        if (step === 3) engine.pause()
      },
    })
    await sleep(300)
    pausedAt = engine.stepCount
    await sleep(300)
    expect(engine.stepCount).toBe(pausedAt)
    engine.requestCheckpoint()
    await sleep(300)
    expect(existsSync(join(runDir, `checkpoint-${pausedAt}`, 'trainer_state.json'))).toBe(true)
    expect(() => engine.saveCheckpoint(join(dir, 'x'))).toThrow(/training/)
    engine.resume()
    await sleep(200)
    expect(engine.stepCount).toBeGreaterThan(pausedAt)
    engine.stop()
    const out = await done
    const last = out.steps.at(-1) as number
    expect(out.status).toBe('stopped')
    expect(out.steps).toEqual(range(1, last))
    expect(out.checkpoints.map(([s]) => s)).toEqual([pausedAt, last])
    expect(engine.stepCount).toBe(last)
  })

  it('stops while paused, saving the final checkpoint', async () => {
    const engine = new Engine(microConfig(100_000), undefined, join(dir, 'paused-stop'))
    engine.setData(shard)
    const done = train(engine, { onStep: (step) => step === 2 && engine.pause() })
    await sleep(200)
    engine.stop()
    const out = await done
    expect(out.status).toBe('stopped')
    expect(out.checkpoints.map(([s]) => s)).toEqual([out.steps.at(-1)])
  })

  it('puts an SSD run’s expert file in its run directory unless the config names one', async () => {
    const ssd = { mode: 'ssd', expert_slots: 2, cache_experts: 5 }
    const runDir = join(dir, 'ssd-run')
    const engine = new Engine(JSON.stringify({ ...tinyConfig({ steps: 1 }), offload: ssd }), undefined, runDir)
    expect(JSON.parse(engine.configJson).offload.ssd_dir).toBe(join(runDir, 'ssd'))
    engine.setData(shard)
    expect((await train(engine)).status).toBe('finished')
    expect(existsSync(join(runDir, 'ssd'))).toBe(true)
    const named = join(dir, 'named-ssd')
    const own = new Engine(JSON.stringify({ ...tinyConfig({ steps: 1 }), offload: { ...ssd, ssd_dir: named } }), undefined, join(dir, 'own'))
    expect(JSON.parse(own.configJson).offload.ssd_dir).toBe(named)
  })

  it('fails once, with a message, when started without a run directory', async () => {
    const engine = new Engine(microConfig(3))
    engine.setData(shard)
    const out = await train(engine)
    expect(out).toMatchObject({ status: 'failed', steps: [], checkpoints: [] })
    expect(out.error).toMatch(/run directory/)
  })

  it('stops after totalSteps, and keeps training when JS drops the object', async () => {
    setFlagsFromString('--expose-gc')
    const gc = runInNewContext('gc') as () => void
    const timer = setInterval(gc, 2)
    try {
      const out = await new Promise<Outcome>((resolve) => {
        const engine = new Engine(microConfig(1000), undefined, join(dir, 'dropped'))
        engine.setData(shard)
        void train(engine, { totalSteps: 200, onStep: gc }).then(resolve)
      })
      expect(out.status).toBe('finished')
      expect(out.steps).toEqual(range(1, 200))
    } finally {
      clearInterval(timer)
    }
  })
})
