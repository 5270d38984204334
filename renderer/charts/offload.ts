// The Run view's offload charts (docs/offload.md, telemetry): peak bytes per tier against the config's
// budgets, bytes moved between tiers, where upload and SSD time went, and the host cache's hits and
// misses. The engine records the SSD tier's metrics as zeros on a host-tier run, so those lines are
// drawn for SSD runs only; a line whose metric the run never recorded is left out too.
import type { EChartsOption } from 'echarts'

import type { ScalarMetric } from '../../main/api/contract'
import { OFFLOAD_FIELD_NAMES, STEP_FIELDS } from '../../main/api/step-fields'
import { METRIC_LABELS } from './compare-overlay'
import { byteUnit, hasValues, metricPoints, stepAxes, type MetricSeries, type Point } from './series'

/** Every metric the engine records only on offloaded steps: what the Run view asks for these charts. */
export const OFFLOAD_METRICS = OFFLOAD_FIELD_NAMES satisfies readonly ScalarMetric[]

type OffloadMetric = (typeof OFFLOAD_METRICS)[number]

const PEAKS = [
  { metric: 'peak_device_bytes', label: 'device', budget: 'device' },
  { metric: 'peak_host_bytes', label: 'host', budget: 'host' },
  { metric: 'peak_ssd_bytes', label: 'SSD', budget: null },
] as const
const MOVED: OffloadMetric[] = ['bytes_h2d', 'bytes_d2h', 'bytes_ssd_read', 'bytes_ssd_write']
const TIMES: OffloadMetric[] = ['upload_ms', 'upload_hidden_ms', 'stall_ms', 'ssd_ms', 'ssd_read_ms', 'prefetch_lead_ms']
const CACHE: OffloadMetric[] = ['cache_hits', 'cache_misses']
// The SSD tier's fields are recorded as zeros on a host-tier run.
const SSD_ONLY = new Set<OffloadMetric>(STEP_FIELDS.filter((f) => f.group === 'ssd').map((f) => f.name as OffloadMetric))

/** Whether the run recorded any offload telemetry. */
export function hasOffloadValues(series: MetricSeries): boolean {
  return OFFLOAD_METRICS.some((m) => hasValues(metricPoints(series, m)))
}

const recorded = (series: MetricSeries, metrics: readonly OffloadMetric[], ssd: boolean) =>
  metrics.filter((m) => (ssd || !SSD_ONLY.has(m)) && hasValues(metricPoints(series, m)))

function lines(series: MetricSeries, metrics: readonly OffloadMetric[], ssd: boolean, yName: string, scale = 1): EChartsOption {
  const shown = recorded(series, metrics, ssd)
  return {
    ...stepAxes(yName, 0),
    legend: { show: shown.length > 1, top: 0, right: 8 },
    series: shown.map((metric) => ({
      name: METRIC_LABELS[metric],
      type: 'line' as const,
      showSymbol: false,
      data: metricPoints(series, metric).map(([step, v]): Point => [step, v === null ? null : v / scale]),
    })),
  }
}

const largest = (series: MetricSeries, metrics: readonly OffloadMetric[]) =>
  Math.max(0, ...metrics.flatMap((m) => metricPoints(series, m).map(([, v]) => v ?? 0)))

/** Peak bytes per tier and step; a budget the config sets is a dashed line on its tier. */
export function tierPeaksOption(series: MetricSeries, budgets: { device: number | null; host: number | null }, ssd: boolean): EChartsOption {
  const kept = recorded(series, PEAKS.map((p) => p.metric), ssd)
  const shown = PEAKS.filter((p) => kept.includes(p.metric))
  const budgetOf = (p: (typeof PEAKS)[number]) => (p.budget === null ? null : budgets[p.budget])
  const unit = byteUnit(Math.max(largest(series, shown.map((p) => p.metric)), ...shown.map((p) => budgetOf(p) ?? 0)))
  return {
    ...stepAxes(`peak ${unit.name}`, 0),
    legend: { show: shown.length > 1, top: 0, right: 8 },
    series: shown.map((p) => {
      const budget = budgetOf(p)
      return {
        name: p.label,
        type: 'line' as const,
        showSymbol: false,
        data: metricPoints(series, p.metric).map(([step, v]): Point => [step, v === null ? null : v / unit.bytes]),
        ...(budget === null
          ? {}
          : { markLine: { symbol: 'none', silent: true, lineStyle: { type: 'dashed' as const }, label: { formatter: `${p.label} budget` }, data: [{ yAxis: budget / unit.bytes }] } }),
      }
    }),
  }
}

/** Bytes moved per step: host→device, device→host, SSD reads and writes. */
export function bytesMovedOption(series: MetricSeries, ssd: boolean): EChartsOption {
  const unit = byteUnit(largest(series, recorded(series, MOVED, ssd)))
  return lines(series, MOVED, ssd, `${unit.name} per step`, unit.bytes)
}

/** Upload time and the part hidden behind compute, stall, SSD time and its reads, and how early prefetched experts arrived. */
export function offloadTimeOption(series: MetricSeries, ssd: boolean): EChartsOption {
  return lines(series, TIMES, ssd, 'ms')
}

/** Host cache hits and misses per step (the SSD tier's cache). */
export function cacheOption(series: MetricSeries): EChartsOption {
  return lines(series, CACHE, true, 'experts per step')
}
