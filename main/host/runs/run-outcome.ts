// How an engine process ended, as a run status and the reason a person reads.
import type { EngineExit } from '../engine/port'

export interface WorkerReport {
  /** What the engine said before exiting, if anything. */
  outcome?: 'finished' | 'stopped'
  failure?: string
  /** The engine stopped the run itself because it diverged (train.on_nonfinite "stop"): what it said. */
  diverged?: string
  /** The last step the host heard of. */
  step: number
}

export function runOutcome(
  report: WorkerReport,
  exit: EngineExit,
): { status: 'finished' | 'stopped' | 'failed'; error: string | null } {
  if (report.failure !== undefined) return { status: 'failed', error: report.failure }
  const at = `at step ${report.step}`
  if (exit.signal) return { status: 'failed', error: `engine process killed by ${exit.signal} ${at}` }
  if (exit.code === null) return { status: 'failed', error: 'engine process could not be started' }
  if (exit.code !== 0) return { status: 'failed', error: `engine process exited with code ${exit.code} ${at}` }
  if (!report.outcome) return { status: 'failed', error: `engine process exited without finishing ${at}` }
  if (report.diverged !== undefined && report.outcome === 'stopped') return { status: 'failed', error: `diverged: ${report.diverged}` }
  return { status: report.outcome, error: null }
}
