// The replay's chart builders: heatmap bitmap and axes, imbalance with threshold and spikes, device bars.
import { describe, expect, it } from 'vitest'

import { deviceBarsData, replayDevicesOption } from '../../renderer/charts/replay-devices'
import { cellAt, cellLabel, colorLut, colorTop, heatmapPixels, replayHeatmapAxesOption } from '../../renderer/charts/replay-heatmap'
import { replayImbalanceOption } from '../../renderer/charts/replay-imbalance'
import { DEFAULT_REPLAY_PALETTE as palette, paletteFromCss } from '../../renderer/charts/replay-palette'

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
  const loads = { devices: 2, before: [40, 60], after: [70, 30], spilledAway: [0, 5] }

  it('updates only series data by id, the after bar without its spilled part', () => {
    expect(deviceBarsData(loads)).toEqual({
      series: [{ id: 'before', data: [40, 60] }, { id: 'after', data: [70, 25] }, { id: 'spilled', data: [0, 5] }],
    })
  })

  it('labels devices, or one bar when placement was not recorded', () => {
    expect((replayDevicesOption(loads, palette) as { xAxis: { data: string[] } }).xAxis.data).toEqual(['dev 0', 'dev 1'])
    const single = replayDevicesOption({ devices: null, before: [3], after: [3], spilledAway: [0] }, palette) as { xAxis: { data: string[] } }
    expect(single.xAxis.data).toEqual(['device'])
  })

  it('takes colours from CSS variables with defaults', () => {
    expect(paletteFromCss((n) => (n === '--accent' ? ' #123456 ' : '')).accent).toBe('#123456')
    expect(paletteFromCss(() => '').text).toBe(palette.text)
  })
})
