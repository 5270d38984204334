// The records the store takes and gives, in the shapes of the typed API (main/api).
import type { z } from 'zod'

import type { DatasetSpecSchema, ExpertShares, ResolvedOffload, RunStatus } from '../../api/contract'
import type { RunConfig } from '../../api/config'
import type { EngineStepRecord } from '../engine/step-record'

export type DatasetSpec = z.output<typeof DatasetSpecSchema>

export interface RunRecord {
  id: string
  name: string
  status: RunStatus
  config: RunConfig
  dataset: DatasetSpec
  init: string | null
  /** The offload the host settled on before the engine started; null: resident (runs from before offload). */
  offload: ResolvedOffload | null
  runDir: string
  createdAt: number
  startedAt: number | null
  finishedAt: number | null
  step: number
  totalSteps: number
  lastLoss: number | null
  tokensPerSec: number | null
  error: string | null
  /** The ESFT measurement the run's chosen experts came from; null or absent: none. */
  expertShares?: ExpertShares | null
}

/** Where an expert's state lives, as stored in expert_loads.tiers. */
export const EXPERT_TIER = { device: 0, host: 1, ssd: 2 } as const

/**
 * A step as the store records it: the engine's record. Its scalars (STEP_FIELDS) fill the `steps` columns of the
 * same names, NULL where absent (the offload-only fields of a resident step); the per-layer arrays fill
 * expert_loads; the engine's `placement` (devices > 1) fills expert_loads.placement with each expert's device and
 * one layer_placements row per MoE layer.
 */
export type StepTelemetry = EngineStepRecord
