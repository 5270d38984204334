// The summary table of Compare: one row per run (final loss, throughput, peak memory per tier, bytes
// moved, wall time) and each value's ratio to a chosen baseline run.
import type { Plan, RunTotals } from '../../../main/api/contract'
import type { RunDetail } from '../../stores/compare'

export interface RunSummaryRow {
  id: string
  name: string
  /** Mean loss of the run's last 10 steps. */
  finalLoss: number | null
  /** Median tokens/s over the run. */
  tokensPerSec: number | null
  peakBytes: { device: number | null; host: number | null; ssd: number | null }
  /** The device peak is the planner's booking, not a measurement (a resident run records no tier peaks). */
  devicePlanned: boolean
  bytesMoved: number | null
  /** ms from start to finish (or to the last recorded step while it runs). */
  wallMs: number | null
}

export type SummaryColumn = 'finalLoss' | 'tokensPerSec' | 'peakDevice' | 'peakHost' | 'peakSsd' | 'bytesMoved' | 'wallMs'

const finite = (values: readonly (number | null)[]): number[] => values.filter((v): v is number => v !== null && Number.isFinite(v))

export function mean(values: readonly (number | null)[]): number | null {
  const xs = finite(values)
  return xs.length === 0 ? null : xs.reduce((a, b) => a + b, 0) / xs.length
}

export function median(values: readonly (number | null)[]): number | null {
  const xs = finite(values).sort((a, b) => a - b)
  if (xs.length === 0) return null
  const mid = xs.length >> 1
  return xs.length % 2 === 1 ? xs[mid]! : (xs[mid - 1]! + xs[mid]!) / 2
}

export interface SummaryInput {
  detail: RunDetail
  /** Loss of the last steps (at most 10 are used). */
  tailLoss: readonly (number | null)[]
  tokensPerSec: readonly (number | null)[]
  wallTime: readonly number[]
  /** The run's totals over every step (null: not loaded). */
  totals?: RunTotals | null
  /** The planner's verdict for its config: the device booking of a run that records none. */
  plan?: Plan | null
}

export function summaryRow({ detail, tailLoss, tokensPerSec, wallTime, totals, plan }: SummaryInput): RunSummaryRow {
  const { summary } = detail
  const end = summary.finishedAt ?? wallTime.at(-1) ?? null
  const start = summary.startedAt ?? wallTime[0] ?? null
  const measuredDevice = totals?.peakBytes.device ?? null
  const plannedDevice = plan?.tiers.find((t) => t.tier === 'device')?.total ?? null
  return {
    id: summary.id,
    name: summary.name,
    finalLoss: mean(tailLoss.slice(-10)),
    tokensPerSec: median(tokensPerSec),
    peakBytes: { device: measuredDevice ?? plannedDevice, host: totals?.peakBytes.host ?? null, ssd: totals?.peakBytes.ssd ?? null },
    devicePlanned: measuredDevice === null && plannedDevice !== null,
    bytesMoved: totals?.bytesMoved ?? null,
    wallMs: start !== null && end !== null ? Math.max(0, end - start) : null,
  }
}

export function columnValue(row: RunSummaryRow, column: SummaryColumn): number | null {
  switch (column) {
    case 'peakDevice':
      return row.peakBytes.device
    case 'peakHost':
      return row.peakBytes.host
    case 'peakSsd':
      return row.peakBytes.ssd
    default:
      return row[column]
  }
}

/** value / baseline's value; null when either is unknown or the baseline is 0. */
export function ratio(value: number | null, baseline: number | null): number | null {
  if (value === null || baseline === null || baseline === 0) return null
  return value / baseline
}

export function ratiosToBaseline(rows: readonly RunSummaryRow[], baselineId: string, columns: readonly SummaryColumn[]): Record<string, Record<SummaryColumn, number | null>> {
  const baseline = rows.find((r) => r.id === baselineId)
  return Object.fromEntries(
    rows.map((row) => [
      row.id,
      Object.fromEntries(columns.map((c) => [c, baseline ? ratio(columnValue(row, c), columnValue(baseline, c)) : null])) as Record<SummaryColumn, number | null>,
    ]),
  )
}
