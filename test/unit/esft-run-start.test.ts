// ESFT without a chosen set at run start: the run manager measures first (the run's data, the config's esft
// settings, the run's init), writes the chosen set into the run's config, stores the measurement with the run and
// starts the engine with that config; a config that names its experts, or a resumed run, is not measured.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import { afterEach, describe, expect, it, vi } from 'vitest'

import { RunConfigSchema } from '../../main/api/config'
import type { EngineExit, EnginePort } from '../../main/host/engine/port'
import type { FromWorker, ToWorker } from '../../main/host/engine/worker-protocol'
import type { MeasureJob } from '../../main/host/measure-experts'
import { RunManager, needsEsftMeasurement } from '../../main/host/runs/run-manager'
import { TelemetryStore } from '../../main/host/store/store'
import { tinyConfig } from '../integration/helpers/engine-fixtures'

class Port implements EnginePort {
  readonly sent: ToWorker[] = []
  send(msg: ToWorker) { this.sent.push(msg) }
  onMessage(_cb: (msg: FromWorker) => void) {}
  onExit(_cb: (e: EngineExit) => void) {}
  kill() {}
}

const cleanups: (() => void)[] = []
afterEach(() => cleanups.splice(0).forEach((c) => c()))

const MEASURED = {
  layers: [0, 1], gate: [[0.7, 0.1, 0.1, 0.1], [0.25, 0.25, 0.25, 0.25]], tokens: [[0.5, 0.2, 0.2, 0.1], [0.25, 0.25, 0.25, 0.25]],
  batches: 3, tokens_seen: 96, threshold: 0.6, score: 'gate', experts: { '0': [0], '1': [0, 1, 2] },
}

function setUp(measure: (job: MeasureJob) => Promise<string>) {
  const dir = mkdtempSync(join(tmpdir(), 'esft-run-start-'))
  const store = TelemetryStore.open(join(dir, 'db.sqlite'))
  cleanups.push(() => { store.close(); rmSync(dir, { recursive: true, force: true }) })
  const ports: Port[] = []
  const manager = new RunManager({
    store, runsDir: join(dir, 'runs'), dbPath: join(dir, 'db.sqlite'), concurrency: 2,
    portFactory: () => { const p = new Port(); ports.push(p); return p },
    workerEntry: 'engine-worker.js',
    prepareDataset: async (spec) => ({ path: `${spec.path}.tokens`, vocabSize: 256, tokens: 10_000 }),
    emit: () => {}, measure,
  })
  return { store, manager, ports }
}

const esftConfig = (experts: Record<string, number[]> | null = null) =>
  RunConfigSchema.parse({ ...tinyConfig(), finetune: { method: 'esft', experts, esft: { threshold: 0.6, sample_batches: 3 } } })

describe('ESFT at run start', () => {
  it('measures first, writes the chosen set into the run’s config and stores the measurement', async () => {
    const jobs: MeasureJob[] = []
    const { store, manager, ports } = setUp(async (job) => { jobs.push(job); return JSON.stringify(MEASURED) })
    const id = manager.create({ name: 'esft', config: esftConfig(), dataset: { path: '/data/x.bin' }, init: '/ckpt/base' }).id
    await vi.waitFor(() => expect(ports).toHaveLength(1))
    expect(jobs).toHaveLength(1)
    expect(jobs[0]).toMatchObject({ tokenFile: '/data/x.bin.tokens', init: '/ckpt/base', batches: 3, threshold: 0.6, score: 'gate' })
    // Only the model and the batch shape reach the measuring engine.
    expect(Object.keys(JSON.parse(jobs[0]!.configJson))).toEqual(['model', 'train'])
    const start = ports[0]!.sent[0] as Extract<ToWorker, { type: 'start' }>
    expect(JSON.parse(start.configJson).finetune.experts).toEqual(MEASURED.experts)
    const run = store.getRun(id)!
    expect(run.config.finetune?.experts).toEqual(MEASURED.experts)
    expect(run.expertShares).toMatchObject({ experts: MEASURED.experts, tokensSeen: 96, score: 'gate' })
    expect(store.listEvents(id).map((e) => e.message).join('\n')).toMatch(/esft: 4 experts chosen over 2 MoE layers/)
  })

  it('leaves a chosen set alone, and fails the run with the measurement’s error', async () => {
    const measure = vi.fn(async () => { throw new Error('measuring the experts failed: data.bin: too short') })
    const { store, manager, ports } = setUp(measure)
    manager.create({ name: 'chosen', config: esftConfig({ '0': [1] }), dataset: { path: '/data/x.bin' } })
    await vi.waitFor(() => expect(ports).toHaveLength(1))
    expect(measure).not.toHaveBeenCalled()
    expect(JSON.parse((ports[0]!.sent[0] as Extract<ToWorker, { type: 'start' }>).configJson).finetune.experts).toEqual({ '0': [1] })
    const failing = manager.create({ name: 'unmeasured', config: esftConfig({}), dataset: { path: '/data/x.bin' } }).id
    await vi.waitFor(() => expect(store.getRun(failing)?.status).toBe('failed'))
    expect(store.getRun(failing)?.error).toMatch(/too short/)
    expect(ports).toHaveLength(1)
  })

  it('names which configs need the measurement', () => {
    expect(needsEsftMeasurement(esftConfig())).toBe(true)
    expect(needsEsftMeasurement(esftConfig({}))).toBe(true)
    expect(needsEsftMeasurement(esftConfig({ '0': [0] }))).toBe(false)
    expect(needsEsftMeasurement(RunConfigSchema.parse(tinyConfig()))).toBe(false)
    expect(needsEsftMeasurement(RunConfigSchema.parse({ ...tinyConfig(), finetune: { method: 'lora', lora: {} } }))).toBe(false)
  })
})
