// A placed run's step records travel from the engine (addon) through the packed record and the StepWriter into
// the store (docs/placement.md): under a hot routing skew on 4 devices, LLEP's spills show as a lower imbalance
// after than before, loads that still add up to every routed token, each expert's device and its spilled tokens; with step record
// v5 each layer's execution on the devices (busy ms, critical / wall / predicted ms, bytes, partitions, reuse)
// and the devices' peaks, also for one pipelined device. A run on one device without a pipeline records none.
import { join } from 'node:path'

import { afterAll, describe, expect, it } from 'vitest'

import { RunConfigSchema } from '../../main/api/config'
import { loadEngineAddon } from '../../main/host/engine/addon'
import { decodeStepRecord } from '../../main/host/engine/step-record'
import { StepWriter } from '../../main/host/engine/step-writer'
import { engineConfigJson } from '../../main/host/runs/engine-config'
import { TelemetryStore } from '../../main/host/store/store'
import { tinyConfig, writeCorpusShard } from '../integration/helpers/engine-fixtures'
import { runRecord, tempDir } from './store-fixtures'

const { Engine } = loadEngineAddon()
const { dir, cleanup } = tempDir()
afterAll(cleanup)
const shard = writeCorpusShard(join(dir, 'corpus.bin'))
const STEPS = 3

async function trainInto(store: TelemetryStore, runId: string, placement: object, pipeline?: object): Promise<void> {
  const config = RunConfigSchema.parse({
    ...tinyConfig({ steps: STEPS }), routing_skew: { distribution: 'hot', hot_fraction: 0.9 }, placement, ...(pipeline ? { pipeline } : {}),
  })
  const engine = new Engine(engineConfigJson(config, null), undefined, join(dir, runId))
  engine.setData(shard)
  store.insertRun(runRecord(runId, { config, totalSteps: STEPS }))
  const writer = new StepWriter(store, runId, (e) => { throw e })
  await new Promise<void>((resolve) =>
    engine.start({}, (buf) => writer.push(decodeStepRecord(buf), Date.now()), () => {}, () => resolve()),
  )
  writer.flush()
}

describe('the engine takes the placement and pipeline the host passes', () => {
  it('as its effective config shows: greedy_split, the device budget and threads, partitions, candidates, reuse', () => {
    const config = RunConfigSchema.parse({
      ...tinyConfig({ steps: STEPS }),
      placement: { devices: 2, policy: 'greedy', greedy_split: false, device_budget_bytes: 2 ** 30, threads_per_device: 2 },
      pipeline: { partitions: 'auto', candidates: [1, 2], memory_reuse: 'auto' },
    })
    const effective = JSON.parse(new Engine(engineConfigJson(config, null)).configJson)
    expect(effective.placement).toMatchObject({ devices: 2, policy: 'greedy', greedy_split: false, device_budget_bytes: 2 ** 30, threads_per_device: 2 })
    expect(effective.pipeline).toEqual({ partitions: 'auto', candidates: [1, 2], memory_reuse: 'auto' })
  })

  it('refuses offload with devices as the schema does, naming placement.devices', () => {
    const json = JSON.stringify({ ...JSON.parse(engineConfigJson(RunConfigSchema.parse({ ...tinyConfig({ steps: STEPS }), placement: { devices: 2 } }), null)),
      offload: { mode: 'host', expert_slots: 2 } })
    expect(() => new Engine(json)).toThrow(/placement\.devices/)
  })
})

describe('placement telemetry: engine -> packed record -> store', () => {
  it('stores every step’s loads per device, imbalance, spills, copies and expert devices; one device stores none', async () => {
    const store = TelemetryStore.open(join(dir, 'telemetry.sqlite'))
    await trainInto(store, 'placed', { devices: 4, policy: 'least-loaded', min_tokens: 4 })
    await trainInto(store, 'single', { devices: 1, policy: 'least-loaded' })
    for (const layer of [0, 1]) {
      const series = store.placementSeries('placed', layer, { maxPoints: 100 })
      expect(series.steps).toEqual([1, 2, 3])
      series.steps.forEach((_, i) => {
        // Expert 0 takes 90% of first choices, so its static home is far above the mean until rows spill.
        expect(series.imbalanceBefore[i]).toBeGreaterThan(1.5)
        expect(series.imbalanceAfter[i]).toBeLessThan(series.imbalanceBefore[i]!)
        expect(series.spilledTokens[i]).toBeGreaterThan(0)
        expect(series.movedExperts[i]).toBeGreaterThan(0)
      })
    }
    const loads = store.stepLoads('placed', STEPS)!
    const routed = 4 * 32 * 2 // batch × seq × top-k
    loads.devices!.forEach((d, l) => {
      expect(d.loadBefore).toHaveLength(4)
      expect(d.loadBefore.reduce((a, b) => a + b, 0)).toBe(routed)
      expect(d.loadAfter.reduce((a, b) => a + b, 0)).toBe(routed)
      expect(Array.from(loads.tokens[l]!).reduce((a, b) => a + b, 0)).toBe(routed)
      // Each expert's spilled tokens add up to the layer's, and only an expert with tokens spills.
      const spilled = Array.from(loads.spilledTokens![l]!)
      expect(spilled.reduce((a, b) => a + b, 0)).toBe(d.spilledTokens)
      spilled.forEach((n, e) => expect(n).toBeLessThanOrEqual(loads.tokens[l]![e]!))
    })
    expect(loads.spilledTokens!.some((layer) => Array.from(layer).some((n) => n > 0))).toBe(true)
    for (const devices of loads.placement!) for (const d of devices) expect(d).toBeGreaterThanOrEqual(0)
    expect(store.stepLoads('single', STEPS)).toMatchObject({ placement: null, devices: null, devicePeakBytes: null })
    expect(store.placementSeries('single', 0, { maxPoints: 100 }).steps).toEqual([])
    store.close()
  })

  it('stores how each layer ran on the devices (step record v5): busy ms per device, times, bytes, partitions, reuse, peaks', async () => {
    const store = TelemetryStore.open(join(dir, 'telemetry-v5.sqlite'))
    await trainInto(store, 'executed', { devices: 4, policy: 'least-loaded', min_tokens: 4 }, { partitions: 2, memory_reuse: 'S2' })
    await trainInto(store, 'pipelined', { devices: 1 }, { partitions: 4 })
    const loads = store.stepLoads('executed', STEPS)!
    for (const d of loads.devices!) {
      const x = d.execution!
      expect(x).toMatchObject({ partitions: 2, reuseStrategy: 2 })
      expect(x.deviceBusyMs).toHaveLength(4)
      expect(x.criticalMs).toBeGreaterThan(0)
      expect(x.wallMs).toBeGreaterThan(0)
      expect(x.predictedMs).toBeGreaterThan(0) // equation 10 for S2
      // Spilled rows travel to other devices and back, and their experts' weights with them.
      expect(x.tokenBytes).toBeGreaterThan(0)
      expect(x.weightBytes).toBeGreaterThan(0)
    }
    expect(loads.devicePeakBytes).toHaveLength(4)
    for (const peak of loads.devicePeakBytes!) expect(peak).toBeGreaterThan(0)
    const series = store.placementSeries('executed', 0, { maxPoints: 100 })
    expect(series.criticalMs.every((v) => v !== null && v > 0)).toBe(true)
    // One device with a pipeline runs through the devices too: n_devices 1, its layers and peak recorded.
    const single = store.stepLoads('pipelined', STEPS)!
    expect(single.devices!.map((d) => [d.loadBefore.length, d.execution?.partitions, d.execution?.reuseStrategy])).toEqual([[1, 4, 0], [1, 4, 0]])
    expect(single.devicePeakBytes).toHaveLength(1)
    store.close()
  })
})
