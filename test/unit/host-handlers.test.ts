import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'

import { afterAll, beforeAll, describe, expect, it } from 'vitest'

import { RunConfigSchema } from '../../main/api/config'
import { dispatch } from '../../main/api/dispatch'
import type { RunConfig } from '../../main/api/config'
import { HF_MODEL_TYPE_NAMES } from '../../main/api/model-families'
import type { EnginePort, EnginePortFactory } from '../../main/host/engine/port'
import { createHost, type Host } from '../../main/host/host'
import { placementOf } from '../bench/synthetic-placement'
import { withExecution } from './synthetic-execution'

const dir = mkdtempSync(join(tmpdir(), 'moe-host-'))
const tiny: RunConfig = RunConfigSchema.parse(JSON.parse(readFileSync('resources/presets/tiny.json', 'utf8')))
const corpus = resolve('resources/corpus/python-tutorial.txt')

// Engine processes that never train: they only answer a stop by exiting, so runs can be created
// and the host closed without the native engine.
const idlePorts: EnginePortFactory = () => {
  let onExit: ((e: { code: number | null; signal: string | null }) => void) | undefined
  const port: EnginePort = {
    send: (msg) => {
      if (msg.type === 'stop') queueMicrotask(() => onExit?.({ code: 0, signal: null }))
    },
    onMessage: () => undefined,
    onExit: (cb) => void (onExit = cb),
    kill: () => queueMicrotask(() => onExit?.({ code: null, signal: 'SIGKILL' })),
  }
  return port
}

let host: Host
const call = (method: string, params: unknown) => dispatch(host.handlers, method, params)

beforeAll(async () => {
  host = await createHost({ dataDir: join(dir, 'home'), portFactory: idlePorts, workerEntry: '/nonexistent/engine-worker.js' })
})
afterAll(async () => {
  await host.close()
  rmSync(dir, { recursive: true, force: true })
})

describe('host layout', () => {
  it('keeps the database, run directories and cache under the data dir', () => {
    expect(readdirSync(host.dataDir).sort()).toEqual(expect.arrayContaining(['cache', 'runs', 'workbench.db']))
  })
})

describe('config.validate', () => {
  it('accepts a valid config', async () => {
    expect(await call('config.validate', { config: tiny })).toEqual({ result: { ok: true, issues: [] } })
  })

  it('returns each problem with its field path', async () => {
    const bad = { model: { ...tiny.model, bogus: 1 }, train: { ...tiny.train, lr: 20 } }
    const reply = (await call('config.validate', { config: bad })) as { result: { ok: boolean; issues: { path: string; message: string }[] } }
    expect(reply.result.ok).toBe(false)
    expect(reply.result.issues.map((i) => i.path).sort()).toEqual(['model', 'train.lr'])
    expect(reply.result.issues.find((i) => i.path === 'model')!.message).toMatch(/bogus/)
    const heads = { model: { ...tiny.model, n_heads: 3, n_kv_heads: 3 }, train: tiny.train }
    const r2 = (await call('config.validate', { config: heads })) as { result: { issues: { path: string; message: string }[] } }
    expect(r2.result.issues).toEqual([{ path: 'model.n_heads', message: 'must divide d_model (256)' }])
  })
})

describe('presets.list', () => {
  it('returns the bundled presets, all valid and described', async () => {
    const reply = (await call('presets.list', {})) as { result: { name: string; description: string; config: unknown }[] }
    const names = reply.result.map((p) => p.name)
    expect(names).toEqual(expect.arrayContaining(['tiny', 'moe-s', 'mixtral-8x7b', 'olmoe-1b-7b']))
    expect(names).toHaveLength(readdirSync('resources/presets').filter((f) => f.endsWith('.json')).length)
    for (const p of reply.result) {
      expect(RunConfigSchema.safeParse(p.config).success).toBe(true)
      expect(p.description.length).toBeGreaterThan(10)
    }
  })
})

describe('runs', () => {
  it('rejects a spec whose data file is missing, recording nothing', async () => {
    const spec = { name: 'missing data', config: tiny, dataset: { path: join(dir, 'nope.txt') } }
    const reply = (await call('runs.create', { spec })) as { error: { code: string; issues: { path: string; message: string }[] } }
    expect(reply.error.code).toBe('invalid-params')
    expect(reply.error.issues).toEqual([{ path: 'spec.dataset.path', message: `${join(dir, 'nope.txt')} does not exist` }])
    expect(host.store.listRuns()).toEqual([])
  })

  it('rejects a model vocabulary smaller than the data needs, naming the field', async () => {
    const config = { ...tiny, model: { ...tiny.model, vocab_size: 100 } }
    const reply = (await call('runs.create', { spec: { name: 'small vocab', config, dataset: { path: corpus } } })) as {
      error: { issues: { path: string; message: string }[] }
    }
    expect(reply.error.issues.map((i) => i.path)).toEqual(['spec.config.model.vocab_size'])
    expect(reply.error.issues[0]!.message).toMatch(/set it to at least 256/)
  })

  it('creates a run with absolute paths and maps it to a summary and detail', async () => {
    const spec = { name: 'Tiny Demo', config: tiny, dataset: { path: corpus } }
    const created = (await call('runs.create', { spec })) as { result: { id: string; model: string; strategy: string } }
    expect(created.result).toMatchObject({ model: 'mixtral L4 d256 8x top-2', strategy: 'resident · dropless · 2 threads' })
    const id = created.result.id
    expect(id).toMatch(/^tiny-demo-/)

    const list = (await call('runs.list', {})) as { result: { id: string; totalSteps: number }[] }
    expect(list.result.map((r) => r.id)).toContain(id)
    expect(list.result.find((r) => r.id === id)!.totalSteps).toBe(tiny.train.steps)

    const detail = (await call('runs.get', { id })) as { result: { dataset: { path: string }; events: { kind: string }[] } }
    expect(detail.result.dataset.path).toBe(corpus)
    expect(detail.result.events.map((e) => e.kind)).toContain('queued')

    await call('runs.stop', { id })
    await host.runs.delete(id)
  })

  it('answers unknown runs with an error naming the id', async () => {
    const reply = (await call('runs.get', { id: 'no-such-run' })) as { error: { message: string } }
    expect(reply.error.message).toBe('no run "no-such-run"')
  })
})

describe('checkpoints.export', () => {
  it('picks checkpoints by step and never writes into a non-empty directory', async () => {
    const id = 'export-guard'
    host.store.insertRun({
      id, name: 'export guard', status: 'finished', config: tiny, dataset: { path: corpus }, init: null, offload: null,
      runDir: join(dir, 'runs', id), createdAt: 1, startedAt: 2, finishedAt: 3, step: 20, totalSteps: 20,
      lastLoss: 2.5, tokensPerSec: 1000, error: null,
    })
    host.store.addCheckpoint({ runId: id, step: 10, path: join(dir, 'ckpt-10'), createdAt: 1, bytes: 1 })
    host.store.addCheckpoint({ runId: id, step: 20, path: join(dir, 'ckpt-20'), createdAt: 2, bytes: 1 })

    // A model type the engine does not write is refused before anything runs, naming the supported ones.
    const unknownType = (await call('checkpoints.export', { id, step: 20, dir: join(dir, 'out'), modelType: 'llama' })) as { error: { message: string } }
    expect(unknownType.error.message).toContain('modelType')
    for (const t of HF_MODEL_TYPE_NAMES) expect(unknownType.error.message).toContain(t)

    const wrongStep = (await call('checkpoints.export', { id, step: 15, dir: join(dir, 'out') })) as { error: { message: string } }
    expect(wrongStep.error.message).toBe(`run "${id}" has no checkpoint at step 15 (it has steps 10, 20)`)

    const occupied = join(dir, 'occupied')
    mkdirSync(occupied)
    writeFileSync(join(occupied, 'keep.txt'), 'mine')
    const refused = (await call('checkpoints.export', { id, dir: occupied })) as { error: { message: string } }
    expect(refused.error.message).toMatch(/already exists and is not empty/)
    expect(readdirSync(occupied)).toEqual(['keep.txt'])

    const summary = (await call('runs.get', { id })) as { result: { summary: { lastLoss: number }; checkpoints: unknown[] } }
    expect(summary.result.summary.lastLoss).toBe(2.5)
    expect(summary.result.checkpoints).toHaveLength(2)
  })
})

describe('placement', () => {
  const id = 'placed'
  const record = (step: number) => {
    const expertTokens = [Int32Array.of(90, 10, 0, 20), Int32Array.of(5, 5, 5, 5)]
    return {
      step, loss: 2, aux_loss: 0, lr: 1e-3, grad_norm: 1, tokens: 64, step_ms: 10, forward_ms: 4, backward_ms: 5, optimizer_ms: 1, eval_loss: NaN,
      expertTokens, placement: placementOf(expertTokens, 2, (_, e) => (e === 0 ? 1 : 0)),
    }
  }
  // Step 3 also says how each layer ran on the devices (step record v5): 4 partitions with S2.
  const executed = (r: ReturnType<typeof record>) => ({ ...r, placement: withExecution(r.placement, { partitions: 4, reuse: 2, step: r.step }) })

  beforeAll(() => {
    const config = RunConfigSchema.parse({ ...tiny, model: { ...tiny.model, n_layers: 2, n_experts: 4 }, placement: { devices: 2, policy: 'greedy' } })
    host.store.insertRun({
      id, name: 'placed', status: 'finished', config, dataset: { path: corpus }, init: null, offload: null,
      runDir: join(dir, 'runs', id), createdAt: 1, startedAt: 2, finishedAt: 3, step: 0, totalSteps: 3,
      lastLoss: null, tokensPerSec: null, error: null,
    })
    host.store.appendSteps(id, [record(1), record(2), executed(record(3))], [1, 2, 3])
  })

  it('serves one layer’s imbalance, spills and weight copies over a step range', async () => {
    const reply = (await call('metrics.placement', { id, layer: 0, fromStep: 2 })) as { result: unknown }
    // Static homes: devices 0 and 1 hold 90 and 30 tokens (max/mean 1.5); placed: expert 0 alone on device 1.
    const x = executed(record(3)).placement.layers[0]!.execution
    expect(reply.result).toEqual({
      layer: 0, steps: [2, 3], imbalanceBefore: [1.5, 1.5], imbalanceAfter: [1.5, 1.5], spilledTokens: [120, 120], movedExperts: [3, 3],
      criticalMs: [null, x.criticalMs], predictedMs: [null, x.predictedMs],
    })
  })

  it('serves one step’s loads per device and expert devices beside its expert tokens', async () => {
    const reply = (await call('metrics.stepLoads', { id, step: 2 })) as { result: { layers: { placement: number[]; devices: unknown }[] } }
    expect(reply.result.layers[0]!.placement).toEqual([1, 0, -1, 0])
    expect(reply.result.layers[0]!.devices).toEqual({
      loadBefore: [90, 30], loadAfter: [30, 90], imbalanceBefore: 1.5, imbalanceAfter: 1.5, spilledTokens: 120, movedExperts: 3, execution: null,
    })
    expect(reply.result).toMatchObject({ devicePeakBytes: null })
  })

  it('serves how each layer ran on the devices and the devices’ peak bytes at a step that recorded them', async () => {
    type Reply = { result: { layers: { devices: { execution: unknown } }[]; devicePeakBytes: number[] } }
    const reply = (await call('metrics.stepLoads', { id, step: 3 })) as Reply
    const written = executed(record(3)).placement
    reply.result.layers.forEach((layer, l) => {
      const x = written.layers[l]!.execution
      expect(layer.devices.execution).toEqual({ ...x, deviceBusyMs: Array.from(x.deviceBusyMs) })
    })
    expect(reply.result.layers[0]!.devices.execution).toMatchObject({ partitions: 4, reuseStrategy: 2 })
    expect(reply.result.devicePeakBytes).toEqual(Array.from(written.devicePeakBytes))
  })

  it('refuses a layer the run does not have, and an unknown run', async () => {
    expect(((await call('metrics.placement', { id, layer: 2 })) as { error: { message: string } }).error.message).toBe(`run ${id}: layer 2 is out of range (2 MoE layers)`)
    expect(((await call('metrics.placement', { id: 'ghost', layer: 0 })) as { error: { message: string } }).error.message).toBe('no run "ghost"')
  })
})
