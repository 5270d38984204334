// The Run view's offload: chart options are pure functions of the offload series, the SSD tier's lines
// (zeros on a host-tier run) are drawn for SSD runs only, the settings say what the host resolved (and that delayed updates are stale),
// and the run-detail store reads an offloaded run's offload series again while it trains.
import { createPinia, setActivePinia } from 'pinia'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'

import { RunConfigSchema } from '../../main/api/config'
import type { ResolvedOffload } from '../../main/api/contract'
import { bytesMovedOption, cacheOption, hasOffloadValues, offloadTimeOption, tierPeaksOption } from '../../renderer/charts/offload'
import type { MetricSeries } from '../../renderer/charts/series'
import { appendSeries, emptySeries } from '../../renderer/stores/metric-history'
import { OFFLOAD_REFRESH_MS, useRunDetailStore } from '../../renderer/stores/run-detail'
import { offloadSettings } from '../../renderer/views/run/offload-settings'
import { stepEvent } from '../unit/contract-fixtures'
import { detailOf } from './compare-fixtures'
import { fakeClient } from './stores-fake-client'

const MiB = 2 ** 20
// A host-tier run: the engine records the SSD tier's metrics as zeros; prefetch lead not at all.
const host: MetricSeries = {
  step: [1, 2],
  wallTime: [10, 20],
  values: {
    peak_device_bytes: [4 * MiB, 5 * MiB], peak_host_bytes: [3 * MiB, 3 * MiB], peak_ssd_bytes: [0, 0],
    bytes_h2d: [2 * MiB, MiB], bytes_d2h: [MiB, MiB], bytes_ssd_read: [0, 0], bytes_ssd_write: [0, 0],
    upload_ms: [10, 12], upload_hidden_ms: [8, 9], stall_ms: [2, 3], ssd_ms: [0, 0], cache_hits: [0, 0], cache_misses: [0, 0],
    prefetch_lead_ms: [null, null],
  },
}

type Line = { name: string; data: [number, number | null][]; markLine?: { data: { yAxis: number }[] } }
const linesOf = (option: { series?: unknown }) => option.series as Line[]

describe('offload charts', () => {
  it('draw peak bytes per tier in the unit that reads best, with the config’s budgets', () => {
    const option = tierPeaksOption(host, { device: 6 * MiB, host: null }, false)
    expect(option.yAxis).toMatchObject({ name: 'peak MiB', min: 0 })
    const [device, hostTier, ...rest] = linesOf(option)
    expect(rest).toEqual([])
    expect(device).toMatchObject({ name: 'device', data: [[1, 4], [2, 5]] })
    expect(device!.markLine!.data).toEqual([{ yAxis: 6 }])
    expect(hostTier).toMatchObject({ name: 'host', data: [[1, 3], [2, 3]] })
    expect(hostTier!.markLine).toBeUndefined()
    expect(tierPeaksOption(host, { device: 2 ** 31, host: null }, false).yAxis).toMatchObject({ name: 'peak GiB' })
    expect(linesOf(tierPeaksOption(host, { device: null, host: null }, true)).map((l) => l.name)).toEqual(['device', 'host', 'SSD'])
  })

  it('draw the SSD tier’s lines for SSD runs only, and no line the run never recorded', () => {
    expect(linesOf(bytesMovedOption(host, false)).map((l) => l.name)).toEqual(['Bytes host→device', 'Bytes device→host'])
    expect(linesOf(bytesMovedOption(host, false))[0]!.data).toEqual([[1, 2], [2, 1]])
    expect(linesOf(offloadTimeOption(host, false)).map((l) => l.name)).toEqual(['Upload (ms)', 'Upload hidden (ms)', 'Stall (ms)'])
    const ssd = { ...host, values: { ...host.values, cache_hits: [5, 7], cache_misses: [3, 1], bytes_ssd_read: [MiB, MiB] } }
    expect(linesOf(bytesMovedOption(ssd, true)).map((l) => l.name)).toEqual(['Bytes host→device', 'Bytes device→host', 'Bytes read from SSD', 'Bytes written to SSD'])
    expect(linesOf(offloadTimeOption(ssd, true)).map((l) => l.name)).toEqual(['Upload (ms)', 'Upload hidden (ms)', 'Stall (ms)', 'SSD (ms)'])
    expect(linesOf(cacheOption(ssd)).map((l) => l.name)).toEqual(['Cache hits', 'Cache misses'])
    expect(linesOf(cacheOption(ssd))[0]!.data).toEqual([[1, 5], [2, 7]])
    // An SSD run that recorded its reads' time (steps from before it did read it as null: no line).
    const reads = { ...ssd, values: { ...ssd.values, ssd_ms: [4, 5], ssd_read_ms: [3, 4.5] } }
    const timed = linesOf(offloadTimeOption(reads, true))
    expect(timed.map((l) => l.name)).toEqual(['Upload (ms)', 'Upload hidden (ms)', 'Stall (ms)', 'SSD (ms)', 'SSD reads (ms)'])
    expect(timed[4]!.data).toEqual([[1, 3], [2, 4.5]])
    expect(linesOf(offloadTimeOption({ ...reads, values: { ...reads.values, ssd_read_ms: [0, 0] } }, false)).map((l) => l.name)).not.toContain('SSD reads (ms)')
  })

  it('know a resident run’s series from an offloaded one’s', () => {
    expect(hasOffloadValues(host)).toBe(true)
    expect(hasOffloadValues({ step: [1], wallTime: [1], values: { peak_device_bytes: [null] } })).toBe(false)
    expect(hasOffloadValues(emptySeries())).toBe(false)
  })
})

describe('offload history', () => {
  it('appends a series read from a later step, keeping every metric aligned', () => {
    const later: MetricSeries = { step: [2, 3], wallTime: [20, 30], values: { peak_device_bytes: [9, 6 * MiB], cache_hits: [1, 2] } }
    const merged = appendSeries(host, later)
    expect(merged.step).toEqual([1, 2, 3])
    expect(merged.values['peak_device_bytes']).toEqual([4 * MiB, 5 * MiB, 6 * MiB])
    expect(merged.values['cache_hits']).toEqual([0, 0, 2])
    expect(merged.values['prefetch_lead_ms']).toEqual([null, null, null])
    expect(merged.values['upload_ms']).toEqual([10, 12, null])
    expect(appendSeries(host, { step: [1], wallTime: [1], values: {} })).toBe(host)
  })
})

describe('offload settings', () => {
  const resolved: ResolvedOffload = {
    requested: 'auto', mode: 'host', deviceBudgetBytes: 6 * MiB, hostBudgetBytes: 64 * MiB, slots: 3, cacheExperts: null, explanation: 'auto → host: …',
  }
  const config = (offload: object) => RunConfigSchema.parse({ model: { arch: 'mixtral' }, train: {}, offload })

  it('list what the host resolved and the knobs that shape the telemetry', () => {
    const rows = Object.fromEntries(offloadSettings(config({ mode: 'auto' }), resolved).map((r) => [r.label, r.value]))
    expect(rows).toEqual({
      mode: 'auto → host', 'expert slots': '3', 'device budget': '6.00 MiB (the machine’s)', lookahead: '1', pinning: '0.25 of the slots, by previous',
      optimizer: 'expert-wise host AdamW', 'copy stream': 'auto (mapped for the SSD tier on the cpu backend, inline for the host tier when compute takes every core, else a copy worker)',
    })
  })

  it('label delayed updates as one step stale, and list the SSD cache', () => {
    const delayed = offloadSettings(config({ mode: 'host', expert_slots: 3, optimizer: 'delayed', optimizer_overlap: false, lookahead: 0 }), { ...resolved, requested: 'host' })
    expect(delayed.find((r) => r.label === 'optimizer')!.value).toBe('delayed (one-step stale: ZeRO-Offload-style ablation, not exact), after the step (no overlap)')
    expect(delayed.find((r) => r.label === 'lookahead')!.value).toBe('0 (no pipelining: upload when needed)')
    expect(delayed.find((r) => r.label === 'device budget')!.value).toBe('none (expert_slots fixed)')
    const inline = offloadSettings(config({ mode: 'host', expert_slots: 3, copy_stream: 'inline' }), { ...resolved, requested: 'host' })
    expect(inline.find((r) => r.label === 'copy stream')!.value).toBe('inline on the compute thread')
    const ssd = offloadSettings(config({ mode: 'ssd', expert_slots: 3, cache_experts: 6, cache_policy: 'lfu' }), { ...resolved, mode: 'ssd', cacheExperts: 6 })
    expect(ssd.find((r) => r.label === 'host cache')!.value).toBe('6 experts, lfu (threshold 2, decay 0.5 every 64)')
    expect(ssd.find((r) => r.label === 'host budget')!.value).toBe('none (cache_experts fixed)')
    expect(offloadSettings(config({ mode: 'auto' }), { ...resolved, mode: 'none' })).toEqual([{ label: 'mode', value: 'auto → none (resident)' }])
  })
})

describe('run-detail store, offloaded run', () => {
  beforeEach(() => setActivePinia(createPinia()))
  afterEach(() => vi.useRealTimers())
  const settle = async () => {
    for (let i = 0; i < 10; i++) await Promise.resolve()
  }

  it('reads the offload series on open and again, from its last step, while steps arrive', async () => {
    vi.useFakeTimers()
    const detail = { ...detailOf('run-1'), offload: { requested: 'host', mode: 'host', deviceBudgetBytes: null, hostBudgetBytes: null, slots: 2, cacheExperts: null, explanation: '' } } as const
    const client = fakeClient({ 'runs.get': async () => detail })
    const store = useRunDetailStore()
    const stop = store.open('run-1', client)
    await settle()
    expect(store.offloaded).toBe(true)
    expect(store.offloadHistory.step).toEqual([1, 2])
    const offloadReads = () => client.calls('metrics.series').filter((p) => (p as { metrics: string[] }).metrics.includes('peak_device_bytes'))
    expect(offloadReads()).toHaveLength(1)
    vi.advanceTimersByTime(OFFLOAD_REFRESH_MS)
    client.emit('run.step', stepEvent('run-1', 3, 2))
    vi.advanceTimersByTime(250)
    await settle()
    expect(offloadReads()).toHaveLength(2)
    expect(offloadReads()[1]).toMatchObject({ fromStep: 3 })
    client.emit('run.step', stepEvent('run-1', 4, 2))
    vi.advanceTimersByTime(250)
    await settle()
    expect(offloadReads()).toHaveLength(2) // within a second of the last read
    stop()
  })
})
