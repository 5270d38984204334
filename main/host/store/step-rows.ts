// StepTelemetry -> the values of one `steps` row, one `expert_loads` row (with each device's peak bytes when
// the record has them) and the step's `layer_placements` rows.
import { STEP_FIELDS, type MeasuredFieldName } from '../../api/step-fields'
import { encodeFloat64s, encodeLayered } from './blobs'
import type { SqlValue } from './db'
import { StoreError } from './errors'
import { encodePlacement } from './placement-rows'
import type { StepTelemetry } from './types'

// Columns filled from the record as-is (NULL when the field is absent), in insert order: every engine field
// but the step number, which leads the row.
export const MEASURED: readonly MeasuredFieldName[] = STEP_FIELDS.map((f) => f.name).filter(
  (name): name is MeasuredFieldName => name !== 'step',
)

const STEP_COLUMNS = ['run_id', 'step', 'wall_time', 'tokens_per_s', ...MEASURED]
export const INSERT_STEP_SQL =
  `INSERT INTO steps (${STEP_COLUMNS.join(', ')}) VALUES (${STEP_COLUMNS.map(() => '?').join(', ')})`
export const INSERT_LOADS_SQL =
  'INSERT INTO expert_loads (run_id, step, tokens, placement, tiers, pins, spilled, device_peak_bytes, selection_bias) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)'

/** Throughput of a step, or null when its time is not positive. */
export function tokensPerSecond(r: StepTelemetry): number | null {
  return r.step_ms > 0 ? r.tokens / (r.step_ms / 1000) : null
}

export interface EncodedStep {
  step: number
  stepValues: SqlValue[]
  loadValues: SqlValue[]
  /** One row per MoE layer with a placement across devices; none without. */
  placementValues: SqlValue[][]
}

// The optional per-layer arrays must describe the same layers and experts as the token counts.
function sameShape(runId: string, r: StepTelemetry, name: string, layers: readonly ArrayLike<number>[]): void {
  const ok = layers.length === r.expertTokens.length && layers.every((a, l) => a.length === r.expertTokens[l].length)
  if (!ok) throw new StoreError(`run ${runId} step ${r.step}: ${name} does not have the shape of expertTokens`)
}

// Each device's peak bytes (step record v5): float64s, one per device of the placement; NULL without them.
function devicePeaks(runId: string, r: StepTelemetry): Uint8Array | null {
  const peaks = r.placement?.devicePeakBytes
  if (!peaks) return null
  const where = `run ${runId} step ${r.step}: devicePeakBytes`
  if (peaks.length !== r.placement!.devices) throw new StoreError(`${where} has ${peaks.length} devices, the placement ${r.placement!.devices}`)
  if (Array.from(peaks).some((v) => !Number.isSafeInteger(v) || v < 0)) throw new StoreError(`${where}: a peak is not a byte count`)
  return encodeFloat64s(peaks)
}

// Each expert's selection bias: float64s, the layers of expertTokens concatenated; NULL without a bias.
function selectionBias(runId: string, r: StepTelemetry): Uint8Array | null {
  if (!r.selectionBias) return null
  sameShape(runId, r, 'selectionBias', r.selectionBias)
  try {
    return encodeFloat64s(r.selectionBias.flatMap((l) => Array.from(l)))
  } catch (e) {
    throw new StoreError(`run ${runId} step ${r.step}: selectionBias: ${(e as Error).message}`)
  }
}

export function encodeStep(runId: string, r: StepTelemetry, wallTime: number): EncodedStep {
  if (!Number.isSafeInteger(r.step) || r.step < 0) throw new StoreError(`run ${runId}: step ${r.step} is not a step number`)
  if (!Number.isFinite(wallTime)) throw new StoreError(`run ${runId} step ${r.step}: wall time ${wallTime} is not finite`)
  const layered = (name: string, layers: readonly ArrayLike<number>[] | undefined, bytes: 1 | 2 | 4): Uint8Array | null => {
    if (!layers) return null
    sameShape(runId, r, name, layers)
    try {
      return encodeLayered(layers, bytes)
    } catch (e) {
      throw new StoreError(`run ${runId} step ${r.step}: ${name}: ${(e as Error).message}`)
    }
  }
  return {
    step: r.step,
    stepValues: [runId, r.step, wallTime, tokensPerSecond(r), ...MEASURED.map((k) => r[k] ?? null)],
    loadValues: [
      runId,
      r.step,
      layered('expertTokens', r.expertTokens, 4),
      // Devices number at most 1024 (and -1: no rows), so int16.
      layered('placement', r.placement?.layers.map((l) => l.expertDevice), 2),
      layered('tiers', r.tiers, 1),
      layered('pins', r.pins, 1),
      layered('spilledTokens', r.spilledTokens, 4),
      devicePeaks(runId, r),
      selectionBias(runId, r),
    ],
    placementValues: encodePlacement(runId, r),
  }
}
