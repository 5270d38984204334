// Pure helpers that grow a run's history with live steps. History from metrics.series is
// downsampled to ≤ 2000 points; live steps are appended and, when the arrays reach twice the cap,
// thinned by dropping every other older point, so a long live session stays bounded.
import { LIVE_METRICS, type EventPayload, type ScalarMetric } from '../../main/api/contract'
import type { ExpertLoad, MetricSeries, Point } from '../charts/series'

export type StepMetrics = EventPayload<'run.step'>['metrics']

// The metrics a live step carries (offload metrics arrive with history only).
export const METRICS = LIVE_METRICS satisfies readonly (ScalarMetric & keyof StepMetrics)[]

export function emptySeries(metrics: readonly ScalarMetric[] = METRICS): MetricSeries {
  return { step: [], wallTime: [], values: Object.fromEntries(metrics.map((m) => [m, []])) }
}

function keptIndices(length: number, cap: number): number[] | null {
  if (length <= 2 * cap) return null
  const keepTail = Math.floor(cap / 2) // the newest points stay at full resolution
  const head = length - keepTail
  const kept: number[] = []
  for (let i = 0; i < head; i += 2) kept.push(i)
  for (let i = head; i < length; i++) kept.push(i)
  return kept
}

/** Appends the rows of `fresh` past the history's last step (live steps, or a series read from a later step). */
export function appendSeries(history: MetricSeries, fresh: MetricSeries, cap = 2000): MetricSeries {
  const lastStep = history.step.at(-1) ?? -Infinity
  const rows = fresh.step.map((step, i) => ({ step, i })).filter((r) => r.step > lastStep).sort((a, b) => a.step - b.step).map((r) => r.i)
  if (rows.length === 0) return history
  const step = [...history.step, ...rows.map((i) => fresh.step[i]!)]
  const wallTime = [...history.wallTime, ...rows.map((i) => fresh.wallTime[i]!)]
  const metrics = [...new Set([...Object.keys(history.values), ...Object.keys(fresh.values)])]
  const values = Object.fromEntries(
    metrics.map((m) => [m, [...(history.values[m] ?? history.step.map(() => null)), ...rows.map((i) => fresh.values[m]?.[i] ?? null)]]),
  )
  const kept = keptIndices(step.length, cap)
  if (!kept) return { step, wallTime, values }
  return {
    step: kept.map((i) => step[i]!),
    wallTime: kept.map((i) => wallTime[i]!),
    values: Object.fromEntries(Object.entries(values).map(([m, vs]) => [m, kept.map((i) => vs[i] ?? null)])),
  }
}

export function appendSteps(history: MetricSeries, steps: readonly StepMetrics[], cap = 2000): MetricSeries {
  const finite = (v: number | null) => (v !== null && Number.isFinite(v) ? v : null)
  const fresh: MetricSeries = {
    step: steps.map((s) => s.step),
    wallTime: steps.map((s) => s.wallTime),
    values: Object.fromEntries(METRICS.map((m) => [m, steps.map((s) => finite(s[m]))])),
  }
  return appendSeries(history, fresh, cap)
}

/** Adds one step's tokens per expert to a layer's load, keeping the latest `maxSteps` rows. */
export function appendExpertLoad(load: ExpertLoad, step: number, tokens: readonly number[], maxSteps: number): ExpertLoad {
  if (tokens.length !== load.experts || step <= (load.steps.at(-1) ?? -Infinity)) return load
  const steps = [...load.steps, step]
  const counts = [...load.counts, ...tokens]
  const drop = Math.max(0, steps.length - maxSteps)
  return { ...load, steps: steps.slice(drop), counts: counts.slice(drop * load.experts) }
}

/** Appends points past the last step (a re-read history may already hold some), thinning past 2 × cap. */
export function appendPoints(points: readonly Point[], fresh: readonly Point[], cap = 2000): Point[] {
  const last = points.at(-1)?.[0] ?? -Infinity
  const newer = fresh.filter((p) => p[0] > last)
  if (newer.length === 0) return points as Point[]
  const all = [...points, ...newer]
  const kept = keptIndices(all.length, cap)
  return kept ? kept.map((i) => all[i]!) : all
}
