// The records the store takes and gives, in the shapes of the typed API (main/api).
import type { z } from 'zod'

import type { DatasetSpecSchema, ResolvedOffload, RunStatus } from '../../api/contract'
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
}

/** Where an expert's state lives, as stored in expert_loads.tiers. */
export const EXPERT_TIER = { device: 0, host: 1, ssd: 2 } as const

/**
 * A step as the store records it: the engine's record plus the offload/placement measurements the
 * engine adds as those features land. Every extra field is optional and stored as NULL when absent,
 * so a plain EngineStepRecord is a valid StepTelemetry. The engine's `placement` (devices > 1) fills
 * expert_loads.placement with each expert's device and one layer_placements row per MoE layer.
 */
export interface StepTelemetry extends EngineStepRecord {
  upload_ms?: number
  upload_hidden_ms?: number
  stall_ms?: number
  ssd_ms?: number
  bytes_h2d?: number
  bytes_d2h?: number
  bytes_ssd_read?: number
  bytes_ssd_write?: number
  cache_hits?: number
  cache_misses?: number
  peak_device_bytes?: number
  peak_host_bytes?: number
  peak_ssd_bytes?: number
  prefetch_lead_ms?: number
  /** [MoE layer][expert] EXPERT_TIER code of the expert's home. */
  tiers?: readonly ArrayLike<number>[]
  /** [MoE layer][expert] 1 when the expert was pinned on its device, else 0. */
  pins?: readonly ArrayLike<number>[]
  /** [MoE layer][expert] tokens of the expert computed away from its home device. */
  spilledTokens?: readonly ArrayLike<number>[]
}
