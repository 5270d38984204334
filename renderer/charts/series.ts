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

/**
 * Axis labels readable at every scale: 1.2K for throughput, 0.012 for aux loss, 3e-4 for lr. `minDecimals` asks for
 * at least that many decimals (axisLabeller: what a narrow axis's ticks need to differ).
 */
export function axisNumber(value: number, minDecimals = 0): string {
  const abs = Math.abs(value)
  if (abs === 0) return '0'
  if (abs >= 1000) return compactNumber.format(value)
  if (abs >= 1) return String(Number(value.toFixed(Math.max(2, minDecimals))))
  const exponent = Math.floor(Math.log10(abs))
  if (abs >= 0.001) {
    // Three significant digits, or the decimals asked for where they are more.
    return String(minDecimals > 2 - exponent ? Number(value.toFixed(minDecimals)) : Number(value.toPrecision(3)))
  }
  return value.toExponential(Math.max(1, minDecimals + exponent)).replace('e-', 'e−')
}

/**
 * The label formatter of an axis over these values: axisNumber with the decimals that ticks about a tenth of the
 * values' range apart need, so a loss moving in its fourth decimal shows 11.925 and 11.926, not 11.93 twice.
 */
export function axisLabeller(values: Iterable<number | null>): (value: number) => string {
  let lo = Infinity, hi = -Infinity
  for (const v of values)
    if (v !== null && Number.isFinite(v)) lo = Math.min(lo, v), hi = Math.max(hi, v)
  const range = hi - lo
  // (less a hair, so that a range of 1e-6 computed as 1.0000000000000003e-6 asks for 7 decimals, not 8)
  const decimals = range > 0 ? Math.min(12, Math.max(0, Math.ceil(-Math.log10(range / 10) - 1e-9))) : 0
  return (value: number) => axisNumber(value, decimals)
}

/** Axis and tooltip layout every time-series chart of the workbench shares. */
export function stepAxes(yName: string, yMin?: number, yLabel: (value: number) => string = (v) => axisNumber(v)) {
  return {
    grid: { left: 60, right: 16, top: 40, bottom: 36 },
    xAxis: { type: 'value' as const, name: 'step', nameLocation: 'middle' as const, nameGap: 24, min: 'dataMin' as const, max: 'dataMax' as const },
    yAxis: { type: 'value' as const, name: yName, scale: yMin === undefined, min: yMin, axisLabel: { formatter: yLabel } },
    tooltip: { trigger: 'axis' as const },
  }
}

/** Tiny test models move a few MiB, real ones many GiB: a byte axis takes the unit that reads best for its largest value. */
export function byteUnit(largest: number): { name: string; bytes: number } {
  return largest >= 2 ** 30 ? { name: 'GiB', bytes: 2 ** 30 } : { name: 'MiB', bytes: 2 ** 20 }
}
