// Compare's overlay: one scalar metric of several runs on one chart, against step or against wall
// time since each run started. With smoothing, each run's raw curve stays visible but faint in the
// run's colour, so a spike is never hidden.
import type { EChartsOption, LineSeriesOption } from 'echarts'

import type { ScalarMetric } from '../../main/api/contract'
import { STEP_FIELDS } from '../../main/api/step-fields'
import { emaSmoothPoints, type SeriesValue } from './smoothing'

export const RUN_COLORS = ['#6ea8fe', '#f0a35e', '#5cc98b', '#c58af9', '#f07171', '#4fd1c5', '#e6b450', '#a0aec0']

/** Chart and picker labels: each engine field's label from the field table, and the store's tokens_per_s. */
export const METRIC_LABELS = {
  ...Object.fromEntries(STEP_FIELDS.map((f) => [f.name, f.label])),
  tokens_per_s: 'Tokens/s',
} as Record<ScalarMetric, string>

export interface OverlayRun {
  id: string
  name: string
  step: readonly number[]
  wallTime: readonly number[]
  values: readonly SeriesValue[]
  /** ms since the epoch the run started; the first point's time when unknown. */
  startedAt: number | null
}

export interface OverlayInput {
  runs: readonly OverlayRun[]
  metric: ScalarMetric
  x: 'step' | 'time'
  smoothing: number
}

export const runColor = (index: number) => RUN_COLORS[index % RUN_COLORS.length]!

export function overlayPoints(run: OverlayRun, x: 'step' | 'time'): [number, SeriesValue][] {
  const start = run.startedAt ?? run.wallTime[0] ?? 0
  return run.values.map((value, i) => [x === 'step' ? run.step[i]! : (run.wallTime[i]! - start) / 1000, value])
}

export function overlayOption({ runs, metric, x, smoothing }: OverlayInput): EChartsOption {
  const series: LineSeriesOption[] = runs.flatMap((run, index) => {
    const color = runColor(index)
    const raw = overlayPoints(run, x)
    const main: LineSeriesOption = {
      id: run.id,
      name: run.name,
      type: 'line',
      data: smoothing > 0 ? emaSmoothPoints(raw, smoothing) : raw,
      showSymbol: false,
      connectNulls: false,
      lineStyle: { width: 2, color },
      itemStyle: { color },
      z: 2,
    }
    if (smoothing <= 0) return [main]
    const faint: LineSeriesOption = {
      id: `${run.id}:raw`,
      name: run.name,
      type: 'line',
      data: raw,
      showSymbol: false,
      silent: true,
      lineStyle: { width: 1, color, opacity: 0.25 },
      itemStyle: { color, opacity: 0.25 },
      tooltip: { show: false },
      z: 1,
    }
    // The legend takes its swatch from the first series of a name: the solid one.
    return [main, faint]
  })
  return {
    animation: false,
    grid: { left: 64, right: 24, top: 40, bottom: 48 },
    legend: { top: 0, data: runs.map((r) => r.name) },
    tooltip: { trigger: 'axis' },
    xAxis: { type: 'value', name: x === 'step' ? 'step' : 'wall time since start (s)', nameLocation: 'middle', nameGap: 28, min: x === 'time' ? 0 : 'dataMin' },
    yAxis: { type: 'value', name: METRIC_LABELS[metric], scale: true },
    series,
  }
}
