// A metric over steps with an EMA-smoothed overlay (loss, aux loss): the raw curve stays visible but
// faint, as in TensorBoard, so smoothing never hides a spike.
import type { EChartsOption } from 'echarts'

import type { ScalarMetric } from '../../main/api/contract'
import { emaSmoothPoints } from './smoothing'
import { axisLabeller, metricPoints, stepAxes, type MetricSeries } from './series'

export interface SmoothedLineInput {
  series: MetricSeries
  metric: ScalarMetric
  label: string
  smoothing: number // 0 … 0.99
  color?: string // raw and smoothed share it, so they read as one metric
  /** A sparse metric drawn as its own points, unsmoothed (the held-out loss on the steps that evaluated). */
  points?: { metric: ScalarMetric; label: string; color?: string }
}

export function smoothedLineOption({ series, metric, label, smoothing, color, points }: SmoothedLineInput): EChartsOption {
  const raw = metricPoints(series, metric)
  const smoothed = smoothing > 0 ? emaSmoothPoints(raw, smoothing) : raw
  const sparse = points ? metricPoints(series, points.metric).filter((p) => p[1] !== null && Number.isFinite(p[1])) : []
  return {
    // Its own range, not zero up: a loss late in training moves in a narrow band, whose ticks need the decimals.
    ...stepAxes(label, undefined, axisLabeller([...raw, ...sparse].map((p) => p[1]))),
    ...(color ? { color: [color] } : {}),
    legend: { show: sparse.length > 0, top: 0, right: 8, data: sparse.length > 0 ? [label, points!.label] : [] },
    series: [
      ...(smoothing > 0
        ? [{ name: `${label} (raw)`, type: 'line' as const, data: raw, showSymbol: false, lineStyle: { opacity: 0.25, width: 1 }, itemStyle: { opacity: 0.25 }, silent: true, z: 1 }]
        : []),
      { name: label, type: 'line' as const, data: smoothed, showSymbol: false, lineStyle: { width: 2 }, z: 2, connectNulls: false },
      ...(sparse.length > 0
        ? [{ name: points!.label, type: 'line' as const, data: sparse, showSymbol: true, symbolSize: 6, lineStyle: { width: 1.5, type: 'dashed' as const }, ...(points!.color ? { itemStyle: { color: points!.color }, color: points!.color } : {}), z: 3 }]
        : []),
    ],
  }
}

/** Several metrics as plain lines on one axis (tokens/s; lr; grad norm). */
export function plainLinesOption(series: MetricSeries, lines: { metric: ScalarMetric; label: string }[], yName: string): EChartsOption {
  return {
    ...stepAxes(yName, 0),
    legend: { show: lines.length > 1, top: 0, right: 8 },
    series: lines.map(({ metric, label }) => ({ name: label, type: 'line' as const, data: metricPoints(series, metric), showSymbol: false })),
  }
}
