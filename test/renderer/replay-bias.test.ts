// The replay's selection-bias heatmap: built from metrics.expertLoad's bias beside the loads, scaled from the
// window's lowest to highest bias, labelled with the bias itself; none for a run without a bias.
import { describe, expect, it } from 'vitest'

import { cellLabel, colorLut, formatBias, heatmapPixels, replayHeatmapAxesOption } from '../../renderer/charts/replay-heatmap'
import { DEFAULT_REPLAY_PALETTE as palette } from '../../renderer/charts/replay-palette'
import { biasHeatmapInput, biasRange } from '../../renderer/replay/bias'

const load = { layer: 1, experts: 2, steps: [1, 11], counts: [9, 1, 5, 5], bias: [0.002, -0.002, 0, 0] }

describe('selection bias heatmap', () => {
  it('spans the lowest to the highest bias and paints through the colour scale', () => {
    const input = biasHeatmapInput(load, 10)!
    expect(input).toMatchObject({ steps: [1, 11], experts: 2, bucketSize: 10, values: 'bias', floor: -0.002 })
    expect(input.top).toBeCloseTo(0.004, 15)
    expect(biasRange(input)).toEqual({ lo: -0.002, hi: 0.002 })
    const px = heatmapPixels(input, colorLut(['#000000', '#ffffff']), input.top)
    expect(px[0]).toBe(255) // column 0, expert 0: the highest bias
    expect(px[8]).toBe(0) // column 0, expert 1: the lowest
    expect(px[4]).toBe(128) // column 1, expert 0: zero, the middle
  })

  it('labels cells with the bias and names what the bucketed columns hold', () => {
    const input = biasHeatmapInput(load, 10)!
    expect(cellLabel(input, 0, 1)).toBe('steps 1–10 (mean) · expert 1: selection bias -2.000e-3')
    expect(cellLabel(input, 0, 0)).toBe('steps 1–10 (mean) · expert 0: selection bias +2.000e-3')
    expect(cellLabel({ ...input, bucketSize: 1 }, 1, 0)).toBe('step 11 · expert 0: selection bias 0')
    const option = replayHeatmapAxesOption(input, palette) as { xAxis: { name: string } }
    expect(option.xAxis.name).toContain('mean bias')
    expect(formatBias(1.25e-3)).toBe('+1.250e-3')
  })

  it('is one colour when every bias is equal, and absent without a bias or steps', () => {
    const flat = biasHeatmapInput({ ...load, bias: [0.5, 0.5, 0.5, 0.5] }, 1)!
    expect(flat.top).toBe(1)
    expect(Array.from(flat.counts)).toEqual([0, 0, 0, 0])
    expect(biasHeatmapInput({ ...load, bias: null }, 1)).toBeNull()
    expect(biasHeatmapInput({ layer: 0, experts: 2, steps: [], counts: [] }, 1)).toBeNull()
  })
})
