// An offloaded run's step records travel from the engine (addon) through the packed record and the StepWriter
// into the store: the offload scalars become queryable metrics and the tiers and pins per-step blobs
// (docs/offload.md). A resident run's records leave those columns empty.
import { join } from 'node:path'

import { afterAll, describe, expect, it } from 'vitest'

import { loadEngineAddon } from '../../main/host/engine/addon'
import { decodeStepRecord } from '../../main/host/engine/step-record'
import { StepWriter } from '../../main/host/engine/step-writer'
import { TelemetryStore } from '../../main/host/store/store'
import { tinyConfig, writeCorpusShard } from '../integration/helpers/engine-fixtures'
import { runRecord, tempDir } from './store-fixtures'

const { Engine } = loadEngineAddon()
const { dir, cleanup } = tempDir()
afterAll(cleanup)
const shard = writeCorpusShard(join(dir, 'corpus.bin'))

async function trainInto(store: TelemetryStore, runId: string, offload?: object): Promise<void> {
  const engine = new Engine(JSON.stringify({ ...tinyConfig({ steps: 3 }), ...(offload ? { offload } : {}) }), undefined, join(dir, runId))
  engine.setData(shard)
  store.insertRun(runRecord(runId, { totalSteps: 3 }))
  const writer = new StepWriter(store, runId, (e) => { throw e })
  await new Promise<void>((resolve) =>
    engine.start({}, (buf) => writer.push(decodeStepRecord(buf), Date.now()), () => {}, () => resolve()),
  )
  writer.flush()
}

describe('offload telemetry: engine -> packed record -> store', () => {
  it('stores bytes, times, peaks, tiers and pins of an offloaded run, and nothing for a resident one', async () => {
    const store = TelemetryStore.open(join(dir, 'telemetry.sqlite'))
    await trainInto(store, 'offloaded', { mode: 'host', expert_slots: 4, pin_fraction: 0.25 })
    await trainInto(store, 'resident')
    const metrics = ['bytes_h2d', 'bytes_d2h', 'upload_ms', 'stall_ms', 'peak_device_bytes', 'peak_host_bytes'] as const
    const off = store.series('offloaded', [...metrics], { maxPoints: 10 })
    expect(off.step).toEqual([1, 2, 3])
    for (const m of ['bytes_h2d', 'bytes_d2h', 'peak_device_bytes', 'peak_host_bytes']) for (const v of off.values[m]) expect(v).toBeGreaterThan(0)
    for (const v of off.values.stall_ms) expect(v).toBeGreaterThanOrEqual(0)
    const loads = store.stepLoads('offloaded', 3)
    expect(loads?.tiers?.map((t) => Array.from(t))).toEqual([[1, 1, 1, 1], [1, 1, 1, 1]])
    expect(loads?.pins?.flatMap((t) => Array.from(t)).reduce((a, b) => a + b, 0)).toBe(1)
    const res = store.series('resident', ['bytes_h2d'], { maxPoints: 10 })
    expect(res.values.bytes_h2d.every((v) => Number.isNaN(v))).toBe(true)
    expect(store.stepLoads('resident', 3)).toMatchObject({ tiers: null, pins: null })
    // Totals over every step: the tier peaks are the series' maxima, bytes moved the sum of both copy directions.
    const of = (m: string) => off.values[m]!.map((v) => v ?? NaN)
    const sum = (m: string) => of(m).reduce((a, b) => a + b, 0)
    expect(store.totals('offloaded')).toEqual({
      steps: 3,
      peakBytes: { device: Math.max(...of('peak_device_bytes')), host: Math.max(...of('peak_host_bytes')), ssd: 0 },
      bytesMoved: sum('bytes_h2d') + sum('bytes_d2h'),
      offloadBytes: sum('bytes_h2d') + sum('bytes_d2h'),
      placementBytes: null,
    })
    expect(store.totals('resident')).toEqual({
      steps: 3, peakBytes: { device: null, host: null, ssd: null }, bytesMoved: null, offloadBytes: null, placementBytes: null,
    })
    store.close()
  })

  it('stores the SSD tier’s traffic, time and its reads’ part, cache hits and misses, peak and prefetch lead', async () => {
    const store = TelemetryStore.open(join(dir, 'ssd.sqlite'))
    await trainInto(store, 'ssd', { mode: 'ssd', expert_slots: 2, cache_experts: 4, ssd_dir: join(dir, 'ssd-experts') })
    const metrics = ['bytes_ssd_read', 'bytes_ssd_write', 'ssd_ms', 'ssd_read_ms', 'cache_hits', 'cache_misses', 'peak_ssd_bytes', 'prefetch_lead_ms'] as const
    const ssd = store.series('ssd', [...metrics], { maxPoints: 10 })
    expect(ssd.step).toEqual([1, 2, 3])
    const values = (m: string) => ssd.values[m]!.map((v) => v ?? NaN) // a missing value fails every comparison
    for (const m of metrics) for (const v of values(m)) expect(v, m).toBeGreaterThanOrEqual(0)
    for (const m of ['bytes_ssd_read', 'cache_misses', 'peak_ssd_bytes']) expect(Math.max(...values(m)), m).toBeGreaterThan(0)
    // The reads are part of the file I/O time.
    values('ssd_read_ms').forEach((v, i) => expect(v).toBeLessThanOrEqual(values('ssd_ms')[i]!))
    expect(Math.max(...values('ssd_read_ms'))).toBeGreaterThan(0)
    expect(store.stepLoads('ssd', 3)?.tiers?.flatMap((t) => Array.from(t))).toEqual(new Array(8).fill(2))
    store.close()
  })
})
