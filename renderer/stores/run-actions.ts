// Which controls a run offers in each status, matching what the host's run manager accepts.
import type { RunStatus } from '../../main/api/contract'

export type RunAction = 'pause' | 'resume' | 'stop' | 'checkpoint' | 'restart' | 'delete'

const BY_STATUS: Record<RunStatus, readonly RunAction[]> = {
  queued: ['stop', 'delete'],
  running: ['pause', 'stop', 'checkpoint', 'delete'],
  paused: ['resume', 'stop', 'checkpoint', 'delete'],
  stopping: ['delete'],
  stopped: ['restart', 'delete'],
  failed: ['restart', 'delete'],
  finished: ['delete'],
}

export function actionsFor(status: RunStatus): readonly RunAction[] {
  return BY_STATUS[status]
}

export const ACTION_LABELS: Record<RunAction, string> = {
  pause: 'Pause',
  resume: 'Resume',
  stop: 'Stop',
  checkpoint: 'Checkpoint now',
  restart: 'Restart',
  delete: 'Delete',
}
