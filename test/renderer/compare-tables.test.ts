// Compare's tables: the config diff keeps only differing fields; the summary reduces series to final
// loss, median throughput and wall time, with ratios to a baseline.
import { describe, expect, it } from 'vitest'

import { RunConfigSchema } from '../../main/api/config'
import { configDiff, flattenConfig } from '../../renderer/views/compare/config-diff'
import { mean, median, ratio, ratiosToBaseline, summaryRow, type RunSummaryRow } from '../../renderer/views/compare/summary'
import { detailOf } from './compare-fixtures'

const base = RunConfigSchema.parse({ model: { arch: 'mixtral', n_experts: 4, top_k: 2 }, train: { steps: 20 } })

describe('config diff', () => {
  it('flattens to dotted paths, lists shown inline', () => {
    const flat = flattenConfig({ ...base, model: { ...base.model, n_experts: [4, 8, 8, 4] } })
    expect(flat['model.top_k']).toBe('2')
    expect(flat['model.n_experts']).toBe('[4, 8, 8, 4]')
    expect(flat['model.capacity_factor']).toBe('null')
  })

  it('shows only the fields that differ, one value per run', () => {
    const other = { model: { ...base.model, top_k: 1 }, train: { ...base.train, lr: 1e-3 } }
    expect(configDiff([base, other])).toEqual([
      { path: 'model.top_k', values: ['2', '1'] },
      { path: 'train.lr', values: ['0.0003', '0.001'] },
    ])
    expect(configDiff([base, base])).toEqual([])
  })

  it('shows a field one run leaves unset as missing there', () => {
    const withKv = { ...base, model: { ...base.model, n_kv_heads: 2 } }
    expect(configDiff([base, withKv])).toEqual([{ path: 'model.n_kv_heads', values: [null, '2'] }])
  })

  it('compares a config without an offload section as resident', () => {
    const resident = RunConfigSchema.parse({ ...base, offload: { mode: 'none' } })
    const host = RunConfigSchema.parse({ ...base, offload: { mode: 'host', expert_slots: 2 } })
    expect(configDiff([base, resident])).toEqual([])
    expect(configDiff([base, host])).toEqual([
      { path: 'offload.mode', values: ['none', 'host'] },
      { path: 'offload.expert_slots', values: ['null', '2'] },
    ])
  })

  it('compares a config without a routing skew as routed by its router', () => {
    const routed = RunConfigSchema.parse({ ...base, routing_skew: { distribution: 'none' } })
    const hot = RunConfigSchema.parse({ ...base, routing_skew: { distribution: 'hot', hot_fraction: 0.8 } })
    expect(configDiff([base, routed])).toEqual([])
    expect(configDiff([base, hot])).toEqual([
      { path: 'routing_skew.distribution', values: ['none', 'hot'] },
      { path: 'routing_skew.hot_fraction', values: ['0.95', '0.8'] },
    ])
  })

  it('compares a config without a placement as one device', () => {
    const single = RunConfigSchema.parse({ ...base, placement: { devices: 1 } })
    const spread = RunConfigSchema.parse({ ...base, placement: { devices: 4, policy: 'least-loaded' } })
    expect(configDiff([base, single])).toEqual([])
    expect(configDiff([base, spread])).toEqual([
      { path: 'placement.devices', values: ['1', '4'] },
      { path: 'placement.policy', values: ['static', 'least-loaded'] },
    ])
  })

  it('compares a config without a pipeline as one partition without memory reuse', () => {
    const flat = RunConfigSchema.parse({ ...base, pipeline: { partitions: 1 } })
    const piped = RunConfigSchema.parse({ ...base, pipeline: { partitions: 'auto', candidates: [2, 4], memory_reuse: 'S2' } })
    expect(configDiff([base, flat])).toEqual([])
    expect(configDiff([base, piped])).toEqual([
      { path: 'pipeline.partitions', values: ['1', 'auto'] },
      { path: 'pipeline.candidates', values: ['[1, 2, 4, 8]', '[2, 4]'] },
      { path: 'pipeline.memory_reuse', values: ['off', 'S2'] },
    ])
  })
})

describe('summary', () => {
  it('reduces with mean and median, ignoring missing values', () => {
    expect(mean([1, null, 3])).toBe(2)
    expect(mean([null])).toBeNull()
    expect(median([5, 1, null, 3])).toBe(3)
    expect(median([4, 1, 3, 2])).toBe(2.5)
  })

  it('takes the final loss from the last 10 steps and the wall time from start to finish', () => {
    const detail = detailOf('a', { startedAt: 1_000, finishedAt: 61_000 })
    const tail = [9, 9, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2]
    const row = summaryRow({ detail, tailLoss: tail, tokensPerSec: [100, 300, 200], wallTime: [2_000, 3_000] })
    expect(row).toMatchObject({ id: 'a', finalLoss: 2, tokensPerSec: 200, wallMs: 60_000, bytesMoved: null })
    expect(row.peakBytes).toEqual({ device: null, host: null, ssd: null })
  })

  it('takes peaks and bytes moved from the run totals, and a resident run’s device peak from the plan', () => {
    const detail = detailOf('c', { startedAt: 1_000, finishedAt: 2_000 })
    const totals = { steps: 3, peakBytes: { device: 100, host: 400, ssd: null }, bytesMoved: 900, offloadBytes: 900, placementBytes: null }
    const offloaded = summaryRow({ detail, tailLoss: [], tokensPerSec: [], wallTime: [], totals })
    expect(offloaded).toMatchObject({ peakBytes: { device: 100, host: 400, ssd: null }, bytesMoved: 900, devicePlanned: false })
    const plan = { tiers: [{ tier: 'device', total: 250 }] } as unknown as Parameters<typeof summaryRow>[0]['plan']
    const none = { steps: 3, peakBytes: { device: null, host: null, ssd: null }, bytesMoved: null, offloadBytes: null, placementBytes: null }
    const resident = summaryRow({ detail, tailLoss: [], tokensPerSec: [], wallTime: [], totals: none, plan })
    expect(resident).toMatchObject({ peakBytes: { device: 250, host: null, ssd: null }, bytesMoved: null, devicePlanned: true })
  })

  it('measures a running run up to its last step', () => {
    const detail = detailOf('b', { startedAt: 1_000, finishedAt: null })
    expect(summaryRow({ detail, tailLoss: [], tokensPerSec: [], wallTime: [2_000, 4_500] }).wallMs).toBe(3_500)
  })

  it('gives ratios to the baseline, and none where a value is unknown', () => {
    expect(ratio(3, 2)).toBe(1.5)
    expect(ratio(null, 2)).toBeNull()
    expect(ratio(1, 0)).toBeNull()
    const row = (id: string, finalLoss: number | null, wallMs: number): RunSummaryRow => ({
      id, name: id, finalLoss, tokensPerSec: null, peakBytes: { device: null, host: null, ssd: null }, devicePlanned: false, bytesMoved: null, wallMs,
    })
    const ratios = ratiosToBaseline([row('a', 2, 10), row('b', 3, 5)], 'a', ['finalLoss', 'wallMs', 'peakDevice'])
    expect(ratios['a']).toEqual({ finalLoss: 1, wallMs: 1, peakDevice: null })
    expect(ratios['b']).toEqual({ finalLoss: 1.5, wallMs: 0.5, peakDevice: null })
  })
})
