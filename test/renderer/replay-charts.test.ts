// The replay's chart builders: heatmap bitmap and axes, imbalance with threshold and spikes, device bars, and
// device imbalance before and after placement.
import { describe, expect, it } from 'vitest'

import { deviceBarsData, replayDevicesOption } from '../../renderer/charts/replay-devices'
import { cellAt, cellLabel, colorLut, colorTop, heatmapPixels, replayHeatmapAxesOption } from '../../renderer/charts/replay-heatmap'
import { IMBALANCE_GRID, replayImbalanceOption } from '../../renderer/charts/replay-imbalance'
import { DEFAULT_REPLAY_PALETTE as palette, deviceColor, paletteFromCss } from '../../renderer/charts/replay-palette'
import { placementImbalanceOption } from '../../renderer/charts/replay-placement'

const input = { steps: [1, 11], experts: 2, counts: [0, 10, 5, 10], bucketSize: 10 }

describe('replay heatmap', () => {
  it('paints one pixel per cell, expert rows top to bottom, through the colour scale', () => {
    const lut = colorLut(['#000000', '#ffffff'])
    expect(Array.from(lut.slice(0, 3))).toEqual([0, 0, 0])
    expect(Array.from(lut.slice(-3))).toEqual([255, 255, 255])
    const px = heatmapPixels(input, lut, 10)
    expect(px.length).toBe(2 * 2 * 4)
    expect(Array.from(px.slice(0, 4))).toEqual([0, 0, 0, 255]) // column 0, expert 0: 0 tokens
    expect(px[4]).toBe(128) // column 1, expert 0: 5 of 10
    expect(px[8]).toBe(255) // column 0, expert 1: 10 of 10
  })

  it('tops the colour scale at the 99th percentile, finds and labels the cell under a point', () => {
    expect(colorTop([1, 2, 3, 1000])).toBe(1000)
    expect(colorTop(Array.from({ length: 1000 }, (_, i) => (i === 999 ? 1e6 : i)))).toBe(990)
    expect(cellAt(input, 60, 10, 100, 40)).toEqual({ column: 1, expert: 0 })
    expect(cellAt(input, 100, 10, 100, 40)).toBeNull()
    expect(cellLabel(input, 0, 1)).toBe('steps 1–10 (mean) · expert 1: 10 tokens')
  })

  it('draws only axes in ECharts, naming the bucket size', () => {
    const option = replayHeatmapAxesOption(input, palette) as { series: unknown[]; xAxis: { data: string[]; name: string } }
    expect(option.series).toEqual([])
    expect(option.xAxis.data).toEqual(['1', '11'])
    expect(option.xAxis.name).toContain('~10 steps')
  })
})

describe('replay imbalance chart', () => {
  it('plots ratios with gaps for missing steps, the threshold line and spike peaks', () => {
    const option = replayImbalanceOption(
      { steps: [1, 2, 3], ratios: [1.2, Number.NaN, 3], threshold: 2, spikeSteps: [{ step: 3, ratio: 3 }], approximate: false },
      palette,
    ) as { series: { data: unknown[]; markLine?: { data: unknown[] } }[] }
    expect(option.series[0]!.data).toEqual([[1, 1.2], [2, null], [3, 3]])
    expect(option.series[0]!.markLine!.data).toEqual([{ yAxis: 2 }])
    expect(option.series[1]!.data).toEqual([[3, 3]])
  })
})

describe('replay device bars', () => {
  const loads = { devices: 2, before: [40, 60], after: [70, 30], imbalanceBefore: 1.2, imbalanceAfter: 1.4, spilledTokens: 30, movedExperts: 1 }

  it('updates only series data by id, each after bar in its device’s colour', () => {
    expect(deviceBarsData(loads)).toEqual({
      series: [
        { id: 'before', data: [40, 60] },
        { id: 'after', data: [{ value: 70, itemStyle: { color: 'hsl(0, 62%, 62%)' } }, { value: 30, itemStyle: { color: 'hsl(180, 62%, 62%)' } }] },
      ],
    })
  })

  it('labels every device, before bars muted and after bars by device', () => {
    const option = replayDevicesOption(loads, palette) as { xAxis: { data: string[] }; series: { id: string; data: unknown[]; itemStyle: { color: string } }[] }
    expect(option.xAxis.data).toEqual(['dev 0', 'dev 1'])
    expect(option.series.map((s) => s.id)).toEqual(['before', 'after'])
    expect(option.series[0]!.itemStyle.color).toBe(palette.muted)
    expect(option.series[1]!.data).toEqual((deviceBarsData(loads).series as { data: unknown[] }[])[1]!.data)
  })

  it('gives devices evenly spread hues', () => {
    expect([0, 1, 2, 3].map((d) => deviceColor(d, 4))).toEqual(['hsl(0, 62%, 62%)', 'hsl(90, 62%, 62%)', 'hsl(180, 62%, 62%)', 'hsl(270, 62%, 62%)'])
    expect(deviceColor(0, 0)).toBe('hsl(0, 62%, 62%)')
  })

  it('takes colours from CSS variables with defaults', () => {
    expect(paletteFromCss((n) => (n === '--accent' ? ' #123456 ' : '')).accent).toBe('#123456')
    expect(paletteFromCss(() => '').text).toBe(palette.text)
  })
})

describe('replay device imbalance chart', () => {
  const series = { steps: [1, 2, 3], imbalanceBefore: [2, 1.9, 2.2], imbalanceAfter: [1.1, 1.05, 1.2] }
  type Option = { series: { id: string; data: unknown[]; lineStyle: { color: string }; markLine?: { data: unknown[]; label: { formatter: string } } }[]; grid: unknown }

  it('plots before and after per step on the expert-imbalance grid, after in the accent colour', () => {
    const option = placementImbalanceOption({ series, lambda: null }, palette) as Option
    expect(option.grid).toEqual(IMBALANCE_GRID)
    expect(option.series.map((s) => s.id)).toEqual(['before', 'after'])
    expect(option.series[0]!.data).toEqual([[1, 2], [2, 1.9], [3, 2.2]])
    expect(option.series[1]!.data).toEqual([[1, 1.1], [2, 1.05], [3, 1.2]])
    expect(option.series[1]!.lineStyle.color).toBe(palette.accent)
    expect(option.series[1]!.markLine!.data).toEqual([])
  })

  it('marks least-loaded’s lambda, the ratio above which it rebalances', () => {
    const option = placementImbalanceOption({ series, lambda: 1.3 }, palette) as Option
    expect(option.series[1]!.markLine!.data).toEqual([{ yAxis: 1.3 }])
    expect(option.series[1]!.markLine!.label.formatter).toBe('λ 1.3: rebalance above')
  })
})
