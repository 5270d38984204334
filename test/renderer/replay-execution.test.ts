// How a layer ran on the devices at the replayed step (step record v5): the view's numbers and texts from the
// recorded execution, and the chart options (busy ms per device with the critical and predicted lines, peak
// bytes per device with the budget line) as pure functions of them, with one server-side render.
import * as echarts from 'echarts'
import { describe, expect, it } from 'vitest'

import type { StepLoads } from '../../main/api/contract'
import { byteTicks, deviceBusyData, deviceBusyOption, devicePeaksData, devicePeaksOption, niceCeil } from '../../renderer/charts/replay-execution'
import { DEFAULT_REPLAY_PALETTE as palette, deviceColor } from '../../renderer/charts/replay-palette'
import { bytesSummary, devicePeaks, executionSummary, layerExecution, peaksSummary } from '../../renderer/replay/execution'

type Layer = StepLoads['layers'][number]
const execution = {
  deviceBusyMs: [4.5, 12.25, 3, 8], criticalMs: 10, wallMs: 31.5, predictedMs: 11.5,
  tokenBytes: 3 * 2 ** 20, weightBytes: 1536, offloadBytes: 2 ** 31, partitions: 4, reuseStrategy: 2,
}
const layerWith = (x: typeof execution | null): Pick<Layer, 'devices'> => ({
  devices: { loadBefore: [1, 2, 3, 4], loadAfter: [2, 2, 3, 3], imbalanceBefore: 1.6, imbalanceAfter: 1.2, spilledTokens: 1, movedExperts: 1, execution: x },
})

describe('layer execution view', () => {
  it('takes partitions, the reuse strategy, predicted against measured, bytes and busy ms from the record', () => {
    expect(layerExecution(layerWith(execution))).toEqual({
      devices: 4, partitions: 4, reuse: 'S2', criticalMs: 10, wallMs: 31.5, predictedMs: 11.5, predictedOverMeasured: 1.15,
      tokenBytes: 3 * 2 ** 20, weightBytes: 1536, offloadBytes: 2 ** 31, busyMs: [4.5, 12.25, 3, 8],
    })
  })

  it('has no prediction without memory reuse, and nothing when the step did not record it', () => {
    const none = layerExecution(layerWith({ ...execution, reuseStrategy: 0, predictedMs: 0 }))!
    expect(none).toMatchObject({ reuse: 'none', predictedMs: null, predictedOverMeasured: null })
    expect(executionSummary(none)).toBe('n = 4 · memory reuse none · critical 10.0 ms, no prediction without memory reuse · wall 31.5 ms')
    expect(layerExecution(layerWith(null))).toBeNull()
    expect(layerExecution({ devices: null })).toBeNull()
    expect(layerExecution(null)).toBeNull()
    expect(layerExecution(layerWith({ ...execution, reuseStrategy: 7 }))!.reuse).toBe('S7?')
  })

  it('says n, the strategy, critical against predicted with their ratio, wall time and bytes moved', () => {
    const x = layerExecution(layerWith(execution))!
    expect(executionSummary(x)).toBe('n = 4 · memory reuse S2 · critical 10.0 ms, predicted 11.5 ms (×1.15) · wall 31.5 ms')
    expect(executionSummary({ ...x, criticalMs: 2.5, predictedMs: 3, predictedOverMeasured: 1.2 })).toMatch(/critical 2\.50 ms, predicted 3\.00 ms \(×1\.20\)/)
    expect(bytesSummary(x)).toBe('moved: tokens 3.00 MiB · weights 1.50 KiB · offloaded 2.00 GiB')
  })

  it('reads the devices’ peaks of the step with the budget, naming the largest', () => {
    expect(devicePeaks({ devicePeakBytes: null }, 2 ** 30)).toBeNull()
    expect(devicePeaks(null, null)).toBeNull()
    const peaks = devicePeaks({ devicePeakBytes: [2 ** 20, 3 * 2 ** 29, 2 ** 29] }, 2 ** 31)!
    expect(peaks).toEqual({ peaks: [2 ** 20, 3 * 2 ** 29, 2 ** 29], budget: 2 ** 31 })
    expect(peaksSummary(peaks)).toBe('peak 1.50 GiB (dev 1) of a 2.00 GiB budget per device')
    expect(peaksSummary({ ...peaks, budget: null })).toBe('peak 1.50 GiB (dev 1), no budget')
  })
})

describe('device busy chart', () => {
  const x = layerExecution(layerWith(execution))!
  type Bars = { id: string; data: { value: number; itemStyle: { color: string } }[]; markLine: { data: { name: string; yAxis: number; lineStyle: { type: string } }[] } }
  type Option = { xAxis: { data: string[] }; yAxis: { name: string; max: (extent: { max: number }) => number | undefined }; series: Bars[] }

  it('has a bar per device in its colour, the measured critical time and the prediction as lines', () => {
    const option = deviceBusyOption(x, palette) as unknown as Option
    expect(option.xAxis.data).toEqual(['dev 0', 'dev 1', 'dev 2', 'dev 3'])
    expect(option.yAxis.name).toBe('busy ms')
    expect(option.series.map((s) => s.id)).toEqual(['busy'])
    expect(option.series[0]!.data).toEqual(x.busyMs.map((value, d) => ({ value, itemStyle: { color: deviceColor(d, 4) } })))
    expect(option.series[0]!.markLine.data.map((l) => [l.name, l.yAxis, l.lineStyle.type])).toEqual([
      ['critical (measured)', 10, 'solid'], ['predicted (eq. 10)', 11.5, 'dashed'],
    ])
    // The bars reach above both lines: ECharts' own scale; a line above every bar: the axis reaches it, at a round number.
    expect(option.yAxis.max({ max: 12.25 })).toBeUndefined()
    expect(option.yAxis.max({ max: 4 })).toBe(20)
  })

  it('updates only the series data, lines and axis reach by id; no prediction line without one', () => {
    const update = deviceBusyData({ ...x, predictedMs: null, busyMs: [1, 2, 3, 4] }, palette) as unknown as Pick<Option, 'series' | 'yAxis'>
    expect(Object.keys(update).sort()).toEqual(['series', 'yAxis'])
    expect(update.series[0]!.id).toBe('busy')
    expect(update.series[0]!.data.map((d) => d.value)).toEqual([1, 2, 3, 4])
    expect(update.series[0]!.markLine.data.map((l) => l.name)).toEqual(['critical (measured)'])
    expect(update.yAxis.max({ max: 4 })).toBe(20) // 10 ms critical × 1.05, rounded up to 2 × 10^k
  })
})

describe('axis scales', () => {
  it('round a line up to 1, 2, 2.5 or 5 × 10^k, and byte ticks to whole binary units', () => {
    expect([0.3, 0.36948, 1, 10.5, 2.2, 4.9].map(niceCeil)).toEqual([0.5, 0.5, 1, 20, 2.5, 5])
    expect(byteTicks(609 * 1024)).toEqual({ max: 800 * 1024, interval: 200 * 1024 })
    expect(byteTicks(3 * 2 ** 20)).toEqual({ max: 3 * 2 ** 20, interval: 2 ** 20 })
    expect(byteTicks(100)).toEqual({ max: 100, interval: 50 })
    expect(byteTicks(0)).toEqual({ max: 1024, interval: 256 })
  })
})

describe('device peaks chart', () => {
  const p = { peaks: [2 ** 20, 3 * 2 ** 29], budget: 2 ** 31 }
  type Option = { xAxis: { data: string[] }; yAxis: { axisLabel: { formatter: (v: number) => string }; max: number; interval: number }; series: { id: string; data: { value: number }[]; markLine: { data: { name: string; yAxis: number }[] } }[] }

  it('has a bar per device in bytes, the budget as a line the axis reaches', () => {
    const option = devicePeaksOption(p, palette) as unknown as Option
    expect(option.xAxis.data).toEqual(['dev 0', 'dev 1'])
    expect(option.series[0]!.data.map((d) => d.value)).toEqual(p.peaks)
    expect(option.series[0]!.markLine.data).toMatchObject([{ name: 'budget 2.00 GiB', yAxis: 2 ** 31 }])
    expect(option.yAxis.axisLabel.formatter(2 ** 30)).toBe('1.00 GiB')
    // Ticks of half GiB reaching the 2 GiB budget above the 1.5 GiB peak.
    expect([option.yAxis.max, option.yAxis.interval]).toEqual([2 * 2 ** 30, 2 ** 29])
  })

  it('draws no budget line for an unlimited budget, and updates data by id', () => {
    const update = devicePeaksData({ ...p, budget: null }, palette) as unknown as Pick<Option, 'series' | 'yAxis'>
    expect(update.series[0]!.id).toBe('peak')
    expect(update.series[0]!.markLine.data).toEqual([])
    // Without a budget the bars set the ticks: 1.5 GiB in steps of 0.5 GiB.
    expect([update.yAxis.max, update.yAxis.interval]).toEqual([1.5 * 2 ** 30, 2 ** 29])
  })

  it('renders the busy chart through ECharts (server side) with every device and both lines', () => {
    const chart = echarts.init(null, undefined, { renderer: 'svg', ssr: true, width: 400, height: 200 })
    chart.setOption(deviceBusyOption(layerExecution(layerWith(execution))!, palette))
    const svg = chart.renderToSVGString()
    chart.dispose()
    expect(svg).toContain('>dev 3<')
    expect(svg).toContain('critical (measured)')
    expect(svg).toContain('predicted (eq. 10)')
  })
})
