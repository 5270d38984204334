// Compare's chart option builders are pure: same input, same option.
import type { LineSeriesOption, ScatterSeriesOption } from 'echarts'
import { describe, expect, it } from 'vitest'

import { memoryScatterOption, PLANNED_SUBTITLE } from '../../renderer/charts/compare-memory'
import { overlayOption, overlayPoints, runColor, type OverlayRun } from '../../renderer/charts/compare-overlay'

const run = (id: string, startedAt: number | null): OverlayRun => ({
  id, name: `run ${id}`, step: [1, 2, 3], wallTime: [11_000, 12_000, 14_000], values: [3, null, 1], startedAt,
})

describe('overlay', () => {
  it('plots against step, or against seconds since each run started', () => {
    expect(overlayPoints(run('a', 10_000), 'step')).toEqual([[1, 3], [2, null], [3, 1]])
    expect(overlayPoints(run('a', 10_000), 'time')).toEqual([[1, 3], [2, null], [4, 1]])
    expect(overlayPoints(run('a', null), 'time')).toEqual([[0, 3], [1, null], [3, 1]])
  })

  it('draws one line per run without smoothing', () => {
    const option = overlayOption({ runs: [run('a', 0), run('b', 0)], metric: 'loss', x: 'step', smoothing: 0 })
    const series = option.series as LineSeriesOption[]
    expect(series.map((s) => s.id)).toEqual(['a', 'b'])
    expect(series[0]!.data).toEqual([[1, 3], [2, null], [3, 1]])
    expect(option.yAxis).toMatchObject({ name: 'Loss' })
  })

  it('keeps the raw curve faint under the smoothed one, in the run’s colour', () => {
    const option = overlayOption({ runs: [run('a', 11_000)], metric: 'tokens_per_s', x: 'time', smoothing: 0.5 })
    const [main, faint] = option.series as LineSeriesOption[]
    expect(faint!.id).toBe('a:raw')
    expect(faint!.lineStyle).toMatchObject({ opacity: 0.25, color: runColor(0) })
    expect(main!.lineStyle).toMatchObject({ color: runColor(0) })
    // TensorBoard's debiased EMA: 3, then (missing), then (0.5·3·0.5 + 0.5·1)/(1 − 0.25) = 1.666…
    const smoothed = main!.data as [number, number | null][]
    expect(smoothed[0]).toEqual([0, 3])
    expect(smoothed[1]).toEqual([1, null])
    expect(smoothed[2]![0]).toBe(3)
    expect(smoothed[2]![1]).toBeCloseTo(5 / 3, 10)
    expect(option.xAxis).toMatchObject({ name: 'wall time since start (s)' })
  })
})

describe('memory scatter', () => {
  it('places each run at (wall time s, device GiB) and says the bytes are planned', () => {
    const option = memoryScatterOption([
      { id: 'a', name: 'a', wallMs: 30_000, deviceBytes: 2 * 2 ** 30, measured: false },
      { id: 'b', name: 'b', wallMs: null, deviceBytes: 2 ** 30, measured: false },
    ])
    const series = option.series as ScatterSeriesOption[]
    expect(series).toHaveLength(1)
    expect(series[0]!.data).toEqual([[30, 2]])
    expect(option.yAxis).toMatchObject({ name: 'device GiB' })
    expect(option.title).toMatchObject({ subtext: PLANNED_SUBTITLE })
  })

  it('reads small planned totals in MiB', () => {
    const option = memoryScatterOption([{ id: 'a', name: 'a', wallMs: 1000, deviceBytes: 6 * 2 ** 20, measured: false }])
    expect((option.series as ScatterSeriesOption[])[0]!.data).toEqual([[1, 6]])
    expect(option.yAxis).toMatchObject({ name: 'device MiB' })
  })
})
