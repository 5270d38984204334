// Messages between the host (RunManager) and an engine process (engine-worker.ts).
import type { EngineStepRecord } from './step-record'

export interface StartTraining {
  type: 'start'
  runId: string
  /** The engine's run directory: its checkpoints (at the config's train.checkpoint_every) and SSD file go there. */
  runDir: string
  /** The engine's config: the validated run config with its offload resolved (runs/engine-config.ts). */
  configJson: string
  /** A token shard ready for the engine. */
  dataPath: string
  /** The held-out shard train.eval_every evaluates on, when the dataset has one. */
  evalPath?: string
  /** Fine-tune: initial weights from this checkpoint. */
  initDir?: string
  /** Continue this run from its checkpoint (weights, optimizer, step, data cursor). */
  resumeDir?: string
  dbPath: string
  /** Stop (as finished) after this step; absent: the config's train.steps. */
  totalSteps?: number
}

export type ToWorker = StartTraining | { type: 'pause' } | { type: 'resume' } | { type: 'stop' } | { type: 'checkpoint' }

/** A step as shown live: the engine's scalars, when it ended, and tokens per expert per MoE layer. */
export interface LiveStep extends Omit<EngineStepRecord, 'expertTokens'> {
  wallTime: number
  expertTokens: number[][]
}

export type FromWorker =
  | { type: 'started'; step: number; numParams: number; backend: string; backendDescription: string }
  | { type: 'step'; record: LiveStep }
  | { type: 'checkpoint'; step: number; dir: string }
  /** The step's loss or gradient norm was not finite; message says which, and what the engine does now. */
  | { type: 'nonfinite'; step: number; message: string }
  | { type: 'done'; status: 'finished' | 'stopped'; step: number }
  | { type: 'failed'; error: string; step: number }

/** Exit codes of the engine process. */
export const WORKER_EXIT = { ok: 0, failed: 1 } as const
