// Chart option builders are pure: data in, ECharts option out.
import { describe, expect, it } from 'vitest'

import { expertHeatmapOption, heatmapCells } from '../../renderer/charts/heatmap'
import { imbalanceOption, imbalanceOverSteps, imbalanceRatio } from '../../renderer/charts/imbalance'
import { plainLinesOption, smoothedLineOption } from '../../renderer/charts/line'
import { axisLabeller, axisNumber, metricPoints, type MetricSeries } from '../../renderer/charts/series'
import { sparklinePath } from '../../renderer/charts/sparkline'
import { stepTimeOption } from '../../renderer/charts/step-time'
import { emptySeries } from '../../renderer/stores/metric-history'

const series: MetricSeries = {
  step: [1, 2, 3],
  wallTime: [10, 20, 30],
  values: {
    loss: [4, null, 2],
    tokens_per_s: [100, 200, 300],
    step_ms: [100, 110, 90],
    forward_ms: [30, 40, 30],
    backward_ms: [50, 50, 50],
    optimizer_ms: [10, 10, 20],
  },
}

type LineSeries = { name: string; data: [number, number | null][]; stack?: string }
const seriesOf = (option: { series?: unknown }) => option.series as LineSeries[]

describe('smoothed line', () => {
  it('draws the raw curve faint and the smoothed one on top, sharing x', () => {
    const option = smoothedLineOption({ series, metric: 'loss', label: 'loss', smoothing: 0.5, color: '#123456' })
    const [raw, smoothed] = seriesOf(option)
    expect(raw!.data).toEqual([[1, 4], [2, null], [3, 2]])
    expect(smoothed!.data[0]).toEqual([1, 4])
    expect(smoothed!.data[1]).toEqual([2, null])
    expect(smoothed!.data[2]![1]).toBeCloseTo((0.5 * 4 * 0.5 + 0.5 * 2) / 0.75, 12)
    expect(option.color).toEqual(['#123456'])
    expect(option.xAxis).toMatchObject({ type: 'value', name: 'step' })
  })

  it('has one series without smoothing and empty data for an empty history', () => {
    expect(seriesOf(smoothedLineOption({ series, metric: 'loss', label: 'loss', smoothing: 0 }))).toHaveLength(1)
    const empty = smoothedLineOption({ series: emptySeries(), metric: 'loss', label: 'loss', smoothing: 0.6 })
    expect(seriesOf(empty).every((s) => s.data.length === 0)).toBe(true)
    expect(metricPoints(series, 'grad_norm')).toEqual([])
  })

  it('plots plain lines on a zero-based axis with a legend only for several', () => {
    const one = plainLinesOption(series, [{ metric: 'tokens_per_s', label: 'tokens/s' }], 'tokens/s')
    expect(seriesOf(one)[0]!.data).toEqual([[1, 100], [2, 200], [3, 300]])
    expect(one.yAxis).toMatchObject({ min: 0 })
    expect(one.legend).toMatchObject({ show: false })
  })
})

describe('step time breakdown', () => {
  it('stacks forward, backward, optimizer and the unaccounted rest up to the step time', () => {
    const parts = seriesOf(stepTimeOption(series))
    expect(parts.map((p) => p.name)).toEqual(['forward', 'backward', 'optimizer', 'other'])
    expect(parts.every((p) => p.stack === 'step')).toBe(true)
    expect(parts[3]!.data).toEqual([[1, 10], [2, 10], [3, 0]]) // never negative
  })

  it('gives empty stacks for an empty history', () => {
    expect(seriesOf(stepTimeOption(emptySeries())).every((p) => p.data.length === 0)).toBe(true)
  })
})

describe('imbalance', () => {
  it('is max/mean of tokens per expert', () => {
    expect(imbalanceRatio([1, 1, 1, 1])).toBe(1)
    expect(imbalanceRatio([4, 0, 0, 0])).toBe(4)
    expect(imbalanceRatio([3, 1])).toBe(1.5)
    expect(imbalanceRatio([0, 0])).toBeNull()
    expect(imbalanceRatio([])).toBeNull()
  })

  it('turns an expert-load matrix into one ratio per step and one line per layer', () => {
    const points = imbalanceOverSteps({ layer: 0, experts: 2, steps: [5, 6], counts: [1, 1, 3, 1] })
    expect(points).toEqual([[5, 1], [6, 1.5]])
    const option = imbalanceOption([{ layer: 0, points }, { layer: 1, points: [] }])
    expect(seriesOf(option).map((s) => s.name)).toEqual(['layer 0', 'layer 1'])
    expect(option.yAxis).toMatchObject({ min: 1 })
  })
})

describe('expert heatmap', () => {
  const load = { layer: 1, experts: 2, steps: [1, 2, 3], counts: [1, 2, 3, 4, 5, 6] }

  it('keeps the latest columns, one cell per expert and step', () => {
    const cells = heatmapCells(load, 2)
    expect(cells.steps).toEqual([2, 3])
    expect(cells.experts).toEqual(['E0', 'E1'])
    expect(cells.cells).toEqual([[0, 0, 3], [0, 1, 4], [1, 0, 5], [1, 1, 6]])
    expect(cells.max).toBe(6)
  })

  it('builds category axes and a visual map bounded by the data', () => {
    const option = expertHeatmapOption(load)
    expect(option.xAxis).toMatchObject({ type: 'category', data: ['1', '2', '3'] })
    expect(option.yAxis).toMatchObject({ type: 'category', data: ['E0', 'E1'] })
    expect(option.visualMap).toMatchObject({ min: 0, max: 6 })
    const empty = expertHeatmapOption({ layer: 0, experts: 4, steps: [], counts: [] })
    expect((empty.series as { data: unknown[] }[])[0]!.data).toEqual([])
    expect(empty.visualMap).toMatchObject({ max: 1 })
  })
})

describe('sparkline path and axis labels', () => {
  it('maps min to the bottom and max to the top, breaking at gaps', () => {
    expect(sparklinePath([2, 1], 10, 10, 0)).toBe('M0.0,0.0L10.0,10.0')
    expect(sparklinePath([3, null, 1, 2], 30, 10, 0)).toBe('M0.0,0.0M20.0,10.0L30.0,5.0')
    expect(sparklinePath([1], 10, 10)).toBe('')
    expect(sparklinePath([], 10, 10)).toBe('')
  })

  it('labels axes readably at every scale', () => {
    expect(axisNumber(0)).toBe('0')
    expect(axisNumber(1500)).toBe('1.5K')
    expect(axisNumber(3.14159)).toBe('3.14')
    expect(axisNumber(0.0123)).toBe('0.0123')
    expect(axisNumber(0.02125)).toBe('0.0213')
    expect(axisNumber(0.0003)).toBe('3.0e−4')
  })

  it('gives a narrow axis as many decimals as its ticks need to differ', () => {
    // A loss moving in its fourth decimal, an aux loss in its sixth, a tiny lr: ticks a tenth of the range apart.
    const cases: [number[], number[]][] = [
      [[11.9205, 11.9302], [11.921, 11.922, 11.923, 11.924]],
      [[0.002, 0.00201], [0.002, 0.002002, 0.002004, 0.002006]],
      [[2e-5, 2.1e-5], [2e-5, 2.02e-5, 2.04e-5]],
      [[1200, 5300], [2000, 3000, 4000]],
    ]
    for (const [values, ticks] of cases) {
      const label = axisLabeller(values)
      const labels = ticks.map(label)
      expect(new Set(labels).size, labels.join(', ')).toBe(ticks.length)
    }
    expect(axisLabeller([11.9205, 11.9302])(11.924)).toBe('11.924')
    expect(axisLabeller([0.002, 0.00201])(0.002004)).toBe('0.002004')
    expect(axisLabeller([2e-5, 2.1e-5])(2.04e-5)).toBe('2.04e−5')
    // A wide range keeps the usual labels; so do no values or one.
    expect(axisLabeller([1, 9])(3.14159)).toBe('3.14')
    expect(axisLabeller([])(0.02125)).toBe('0.0213')
    expect(axisLabeller([null, 4, 4])(4)).toBe('4')
  })
})
