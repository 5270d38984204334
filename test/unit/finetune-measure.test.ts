// finetune.measureExperts: the request's defaults come from the config's finetune.esft, the engine gets only the
// model and train sections, the dataset goes through the run's preparation, and the real engine (through the
// addon, on a worker) returns shares that sum to 1 per MoE layer with the chosen set by the rule. The measurement
// is stored with a run and returned in its detail.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import { afterAll, describe, expect, test } from 'vitest'

import { RunConfigSchema } from '../../main/api/config'
import type { ExpertShares, ParsedParams } from '../../main/api/contract'
import { dispatch } from '../../main/api/dispatch'
import { createHandlers } from '../../main/host/handlers'
import { expertSharesFromEngine, measureExperts, measureJob, runMeasureWorker, type MeasureJob } from '../../main/host/measure-experts'
import { TelemetryStore } from '../../main/host/store/store'
import { tinyConfig, writeCorpusShard } from '../integration/helpers/engine-fixtures'
import { runRecord } from './store-fixtures'

const dir = mkdtempSync(join(tmpdir(), 'moe-measure-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const shard = writeCorpusShard(join(dir, 'corpus.bin'), 8192)
const params = (extra: object = {}): ParsedParams<'finetune.measureExperts'> =>
  ({ config: tinyConfig(), dataset: { path: shard }, ...extra }) as ParsedParams<'finetune.measureExperts'>

const SHARES: ExpertShares = {
  layers: [0, 1], gate: [[0.5, 0.5], [0.9, 0.1]], tokens: [[0.5, 0.5], [0.75, 0.25]], batches: 2, tokensSeen: 256,
  threshold: 0.8, score: 'tokens', experts: { 0: [0, 1], 1: [0, 1] },
}

describe('the measurement job', () => {
  test('defaults: the config’s finetune.esft, else 32 batches, p 0.9, gate', () => {
    const plain = measureJob(params(), '/x.bin')
    expect([plain.batches, plain.threshold, plain.score]).toEqual([32, 0.9, 'gate'])
    const config = RunConfigSchema.parse({ ...tinyConfig(), finetune: { method: 'esft', esft: { sample_batches: 3, threshold: 0.5, score: 'tokens' } },
      offload: { mode: 'auto' } })  // (host or SSD offload with a finetune section is refused by the schema)
    const fromConfig = measureJob(params({ config }), '/x.bin')
    expect([fromConfig.batches, fromConfig.threshold, fromConfig.score]).toEqual([3, 0.5, 'tokens'])
    expect(measureJob(params({ config, batches: 7, threshold: 1, score: 'gate' }), '/x.bin')).toMatchObject({ batches: 7, threshold: 1, score: 'gate' })
    // Only the model and the batch shape reach the engine: no offload, no finetune section.
    expect(Object.keys(JSON.parse(fromConfig.configJson))).toEqual(['model', 'train'])
  })

  test('the engine’s JSON becomes the API’s shape', () => {
    expect(expertSharesFromEngine(JSON.stringify({ ...SHARES, tokensSeen: undefined, tokens_seen: 256 }))).toEqual(SHARES)
  })

  test('the handler prepares the dataset and validates the request', async () => {
    const jobs: MeasureJob[] = []
    const run = async (job: MeasureJob) => {
      jobs.push(job)
      return JSON.stringify({ ...SHARES, tokens_seen: 256 })
    }
    const shares = await measureExperts(params({ threshold: 0.8 }), {
      prepare: async (spec) => ({ path: `${spec.path}.prepared`, vocabSize: 256, tokens: 1 }), cacheDir: dir, run,
    })
    expect(shares).toEqual(SHARES)
    expect(jobs[0]?.tokenFile).toBe(`${shard}.prepared`)
    const handlers = createHandlers({ store: {} as never, runs: {} as never, dataDir: dir, measure: async () => SHARES })
    expect(await dispatch(handlers, 'finetune.measureExperts', params())).toEqual({ result: SHARES })
    const bad = (await dispatch(handlers, 'finetune.measureExperts', params({ threshold: 1.5 }))) as { error: { message: string } }
    expect(bad.error.message).toMatch(/threshold/)
  })
})

describe('the engine measures', () => {
  test('shares per MoE layer sum to 1 and the chosen set reaches the threshold', async () => {
    const json = await runMeasureWorker(measureJob(params({ batches: 3, threshold: 0.6, score: 'tokens' }), shard))
    const s = expertSharesFromEngine(json)
    expect(s.layers).toEqual([0, 1])
    expect(s.batches).toBe(3)
    expect(s.tokensSeen).toBe(3 * 4 * 32)
    for (const [i, layer] of s.layers.entries()) {
      for (const shares of [s.gate[i]!, s.tokens[i]!]) expect(shares.reduce((a, b) => a + b, 0)).toBeCloseTo(1, 12)
      const chosen = s.experts[String(layer)]!
      const reached = chosen.reduce((a, e) => a + s.tokens[i]![e]!, 0)
      expect(reached).toBeGreaterThanOrEqual(0.6 - 1e-9)
      // The smallest such set: without its smallest member it falls short.
      const smallest = Math.min(...chosen.map((e) => s.tokens[i]![e]!))
      expect(reached - smallest).toBeLessThan(0.6)
    }
  })

  test('a bad shard is refused with the engine’s message', async () => {
    await expect(runMeasureWorker(measureJob(params(), join(dir, 'missing.bin')))).rejects.toThrow(/measuring the experts failed: .*missing\.bin/)
  })
})

describe('stored with the run', () => {
  test('a run keeps its measurement; a run without one reads as none', async () => {
    const store = TelemetryStore.open(join(dir, 'store.sqlite'))
    try {
      store.insertRun(runRecord('with', { expertShares: SHARES }))
      store.insertRun(runRecord('without'))
      expect(store.getRun('with')?.expertShares).toEqual(SHARES)
      expect(store.getRun('without')?.expertShares).toBeUndefined()
      const handlers = createHandlers({ store, runs: {} as never, dataDir: dir })
      expect((await handlers['runs.get']({ id: 'with' })).expertShares).toEqual(SHARES)
      expect((await handlers['runs.get']({ id: 'without' })).expertShares).toBeNull()
    } finally {
      store.close()
    }
  })
})
