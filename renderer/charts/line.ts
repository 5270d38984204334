// A metric over steps with an EMA-smoothed overlay (loss, aux loss): the raw curve stays visible but
// faint, as in TensorBoard, so smoothing never hides a spike.
import type { EChartsOption } from 'echarts'

import type { ScalarMetric } from '../../main/api/contract'
import { emaSmoothPoints } from './smoothing'
import { metricPoints, stepAxes, type MetricSeries } from './series'

export interface SmoothedLineInput {
  series: MetricSeries
  metric: ScalarMetric
  label: string
  smoothing: number // 0 … 0.99
  color?: string // raw and smoothed share it, so they read as one metric
}

export function smoothedLineOption({ series, metric, label, smoothing, color }: SmoothedLineInput): EChartsOption {
  const raw = metricPoints(series, metric)
  const smoothed = smoothing > 0 ? emaSmoothPoints(raw, smoothing) : raw
  return {
    ...stepAxes(label),
    ...(color ? { color: [color] } : {}),
    legend: { show: false },
    series: [
      ...(smoothing > 0
        ? [{ name: `${label} (raw)`, type: 'line' as const, data: raw, showSymbol: false, lineStyle: { opacity: 0.25, width: 1 }, itemStyle: { opacity: 0.25 }, silent: true, z: 1 }]
        : []),
      { name: label, type: 'line' as const, data: smoothed, showSymbol: false, lineStyle: { width: 2 }, z: 2, connectNulls: false },
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
