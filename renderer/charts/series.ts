// Shapes the chart builders read, and the small conversions they share.
import type { ExpertLoadSchema, Result, ScalarMetric } from '../../main/api/contract'
import type { z } from 'zod'

export type MetricSeries = Result<'metrics.series'>
export type ExpertLoad = z.output<typeof ExpertLoadSchema>
export type Point = [number, number | null]

/** [step, value] pairs of one metric; an absent metric gives no points. */
export function metricPoints(series: MetricSeries, metric: ScalarMetric): Point[] {
  const values = series.values[metric]
  if (!values) return []
  return series.step.map((step, i) => [step, values[i] ?? null])
}

export function hasValues(points: readonly Point[]): boolean {
  return points.some((p) => p[1] !== null)
}

const compactNumber = new Intl.NumberFormat('en', { notation: 'compact', maximumFractionDigits: 1 })

/** Axis labels readable at every scale: 1.2K for throughput, 0.012 for aux loss, 3e-4 for lr. */
export function axisNumber(value: number): string {
  const abs = Math.abs(value)
  if (abs === 0) return '0'
  if (abs >= 1000) return compactNumber.format(value)
  if (abs >= 1) return String(Number(value.toFixed(2)))
  if (abs >= 0.001) return String(Number(value.toPrecision(3)))
  return value.toExponential(1).replace('e-', 'e−')
}

/** Axis and tooltip layout every time-series chart of the workbench shares. */
export function stepAxes(yName: string, yMin?: number) {
  return {
    grid: { left: 60, right: 16, top: 40, bottom: 36 },
    xAxis: { type: 'value' as const, name: 'step', nameLocation: 'middle' as const, nameGap: 24, min: 'dataMin' as const, max: 'dataMax' as const },
    yAxis: { type: 'value' as const, name: yName, scale: yMin === undefined, min: yMin, axisLabel: { formatter: axisNumber } },
    tooltip: { trigger: 'axis' as const },
  }
}

/** Tiny test models move a few MiB, real ones many GiB: a byte axis takes the unit that reads best for its largest value. */
export function byteUnit(largest: number): { name: string; bytes: number } {
  return largest >= 2 ** 30 ? { name: 'GiB', bytes: 2 ** 30 } : { name: 'MiB', bytes: 2 ** 20 }
}
