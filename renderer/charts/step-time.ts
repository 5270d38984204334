// Where each step's time went: forward, backward and optimizer stacked, with the rest of the step
// (data, routing bookkeeping, telemetry) on top, so the stack's height is the step time.
import type { EChartsOption } from 'echarts'

import { metricPoints, stepAxes, type MetricSeries, type Point } from './series'

const PARTS = [
  { metric: 'forward_ms', label: 'forward' },
  { metric: 'backward_ms', label: 'backward' },
  { metric: 'optimizer_ms', label: 'optimizer' },
] as const

export function stepTimeOption(series: MetricSeries): EChartsOption {
  const parts = PARTS.map(({ metric, label }) => ({ label, points: metricPoints(series, metric) }))
  const total = metricPoints(series, 'step_ms')
  const other: Point[] = total.map(([step, ms], i) => {
    if (ms === null) return [step, null]
    const accounted = parts.reduce((sum, part) => sum + (part.points[i]?.[1] ?? 0), 0)
    return [step, Math.max(0, ms - accounted)]
  })
  return {
    ...stepAxes('ms', 0),
    legend: { top: 0, right: 8 },
    series: [...parts, { label: 'other', points: other }].map(({ label, points }) => ({
      name: label,
      type: 'line' as const,
      stack: 'step',
      areaStyle: { opacity: 0.6 },
      lineStyle: { width: 0 },
      showSymbol: false,
      data: points,
    })),
  }
}
