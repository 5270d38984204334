// Filtering and sorting of the Runs table, pure so the table and its tests share one definition.
import type { RunStatus, RunSummary } from '../../main/api/contract'

export type RunColumn = 'name' | 'model' | 'strategy' | 'status' | 'step' | 'loss' | 'tokensPerSec' | 'startedAt'
export type SortDirection = 'ascending' | 'descending'

export interface RunFilter {
  text: string
  status: RunStatus | 'all' | 'active' // active: queued, running, paused or stopping
}

const ACTIVE: readonly RunStatus[] = ['queued', 'running', 'paused', 'stopping']

export function matchesFilter(run: RunSummary, { text, status }: RunFilter): boolean {
  if (status === 'active' ? !ACTIVE.includes(run.status) : status !== 'all' && run.status !== status) return false
  const needle = text.trim().toLowerCase()
  if (!needle) return true
  return [run.name, run.id, run.model, run.strategy, run.status].some((field) => field.toLowerCase().includes(needle))
}

function sortKey(run: RunSummary, column: RunColumn): string | number | null {
  switch (column) {
    case 'loss':
      return run.lastLoss
    case 'step':
      return run.step
    default:
      return run[column]
  }
}

/** Sorted copy; runs without a value in the column (no loss yet, never started) go last either way. */
export function sortRuns(runs: readonly RunSummary[], column: RunColumn, direction: SortDirection): RunSummary[] {
  const sign = direction === 'ascending' ? 1 : -1
  return [...runs].sort((a, b) => {
    const x = sortKey(a, column)
    const y = sortKey(b, column)
    if (x === null || y === null) return x === y ? b.createdAt - a.createdAt : x === null ? 1 : -1
    const order = typeof x === 'string' ? x.localeCompare(String(y)) : x - (y as number)
    return order !== 0 ? sign * order : b.createdAt - a.createdAt
  })
}

export function formatStarted(at: number | null, now = Date.now()): string {
  if (at === null) return '—'
  const seconds = Math.round((now - at) / 1000)
  if (seconds < 60) return 'just now'
  if (seconds < 3600) return `${Math.round(seconds / 60)} min ago`
  if (seconds < 86400) return `${Math.round(seconds / 3600)} h ago`
  return new Date(at).toLocaleDateString()
}
