// A step's placement across devices (StepTelemetry.placement) <-> rows of `layer_placements`, one per MoE
// layer: the engine's imbalance, spilled tokens and weight copies as columns (read as series without
// decoding anything), and the tokens per device before and after as one-row int32 layered blobs (blobs.ts).
// How the layer ran on the devices (step record v5, migration 4) adds its critical, wall and predicted ms,
// bytes moved, partitions and memory-reuse strategy as columns and the busy ms per device as a float64 blob,
// all NULL when the engine did not measure them (and in rows from before migration 4).
import { decodeFloat64s, encodeFloat64s, encodeLayered, layeredArrays, viewLayered } from './blobs'
import type { LayerExecution } from '../engine/step-record-placement'
import type { SqlRow, SqlValue } from './db'
import { StoreError } from './errors'
import type { StepTelemetry } from './types'

const PLACEMENT_COLUMNS = [
  'run_id', 'step', 'layer', 'imbalance_before', 'imbalance_after', 'spilled_tokens', 'moved_experts', 'load_before',
  'load_after', 'critical_ms', 'wall_ms', 'predicted_ms', 'token_bytes', 'weight_bytes', 'offload_bytes', 'partitions',
  'reuse_strategy', 'device_busy_ms',
]
export const INSERT_PLACEMENT_SQL =
  `INSERT INTO layer_placements (${PLACEMENT_COLUMNS.join(', ')}) VALUES (${PLACEMENT_COLUMNS.map(() => '?').join(', ')})`

/** One MoE layer's placement at one step, as stored. */
export interface LayerDevices {
  imbalanceBefore: number
  imbalanceAfter: number
  spilledTokens: number
  movedExperts: number
  loadBefore: Int32Array
  loadAfter: Int32Array
  /** null when the step's record did not say how the layer ran (before step record v5, or not measured). */
  execution: LayerExecution | null
}

/** Memory-reuse strategies the engine records: 0 none, 1..4 S1..S4. */
const REUSE_STRATEGIES = 5

/** The values of the step's layer_placements rows; none without a placement. */
export function encodePlacement(runId: string, r: StepTelemetry): SqlValue[][] {
  const p = r.placement
  if (!p) return []
  const where = `run ${runId} step ${r.step}: placement`
  if (!Number.isInteger(p.devices) || p.devices < 1) throw new StoreError(`${where} has ${p.devices} devices; it needs at least 1`)
  if (p.layers.length !== r.expertTokens.length)
    throw new StoreError(`${where} has ${p.layers.length} layers, expertTokens ${r.expertTokens.length}`)
  const executed = p.layers.filter((l) => l.execution !== undefined).length
  if (executed !== 0 && executed !== p.layers.length)
    throw new StoreError(`${where}: ${executed} of ${p.layers.length} layers say how they ran on the devices; all or none must`)
  return p.layers.map((l, layer) => {
    const fail = (what: string) => new StoreError(`${where} layer ${layer}: ${what}`)
    if (l.loadBefore.length !== p.devices || l.loadAfter.length !== p.devices)
      throw fail(`loads for ${l.loadBefore.length} and ${l.loadAfter.length} devices, not ${p.devices}`)
    if (!Number.isFinite(l.imbalanceBefore) || !Number.isFinite(l.imbalanceAfter))
      throw fail(`imbalance ${l.imbalanceBefore} -> ${l.imbalanceAfter} is not finite`)
    for (const [name, v] of [['spilledTokens', l.spilledTokens], ['movedExperts', l.movedExperts]] as const)
      if (!Number.isSafeInteger(v) || v < 0) throw fail(`${name} ${v} is not a count`)
    if (l.expertDevice.some((d) => d < -1 || d >= p.devices)) throw fail(`an expert's device is outside -1 … ${p.devices - 1}`)
    const loads = (name: string, values: ArrayLike<number>) => {
      try {
        return encodeLayered([values], 4)
      } catch (e) {
        throw fail(`${name}: ${(e as Error).message}`)
      }
    }
    return [runId, r.step, layer, l.imbalanceBefore, l.imbalanceAfter, l.spilledTokens, l.movedExperts,
      loads('loadBefore', l.loadBefore), loads('loadAfter', l.loadAfter), ...executionValues(l.execution, p.devices, fail)]
  })
}

function executionValues(x: LayerExecution | undefined, devices: number, fail: (what: string) => StoreError): SqlValue[] {
  if (!x) return [null, null, null, null, null, null, null, null, null]
  for (const [name, v] of [['criticalMs', x.criticalMs], ['wallMs', x.wallMs], ['predictedMs', x.predictedMs]] as const)
    if (!Number.isFinite(v) || v < 0) throw fail(`${name} ${v} is not a time`)
  for (const [name, v] of [['tokenBytes', x.tokenBytes], ['weightBytes', x.weightBytes], ['offloadBytes', x.offloadBytes]] as const)
    if (!Number.isSafeInteger(v) || v < 0) throw fail(`${name} ${v} is not a byte count`)
  if (!Number.isInteger(x.partitions) || x.partitions < 1 || x.partitions > 64) throw fail(`partitions ${x.partitions} is not in 1 … 64`)
  if (!Number.isInteger(x.reuseStrategy) || x.reuseStrategy < 0 || x.reuseStrategy >= REUSE_STRATEGIES)
    throw fail(`reuseStrategy ${x.reuseStrategy} is not 0 (none) … 4 (S4)`)
  if (x.deviceBusyMs.length !== devices) throw fail(`deviceBusyMs for ${x.deviceBusyMs.length} devices, not ${devices}`)
  let busy: Uint8Array
  try {
    if (Array.from(x.deviceBusyMs).some((v) => v < 0)) throw new RangeError('a time is negative')
    busy = encodeFloat64s(x.deviceBusyMs)
  } catch (e) {
    throw fail(`deviceBusyMs: ${(e as Error).message}`)
  }
  return [x.criticalMs, x.wallMs, x.predictedMs, x.tokenBytes, x.weightBytes, x.offloadBytes, x.partitions, x.reuseStrategy, busy]
}

/** A layer_placements row (every column) as the layer's placement; a corrupt blob is named. */
export function decodeLayerDevices(runId: string, row: SqlRow): LayerDevices {
  const corrupt = (column: string, e: unknown) =>
    new StoreError(`run ${runId} step ${Number(row.step)} layer ${Number(row.layer)}: layer_placements.${column} is corrupt: ${(e as Error).message}`)
  const loads = (column: 'load_before' | 'load_after') => {
    const blob = row[column]
    try {
      if (!(blob instanceof Uint8Array)) throw new RangeError('not a blob')
      const view = viewLayered(blob)
      if (view.layers !== 1) throw new RangeError(`${view.layers} rows, expected 1`)
      return layeredArrays(view)[0]!
    } catch (e) {
      throw corrupt(column, e)
    }
  }
  const loadBefore = loads('load_before')
  let execution: LayerExecution | null = null
  if (row.device_busy_ms != null) {
    let deviceBusyMs: Float64Array
    try {
      if (!(row.device_busy_ms instanceof Uint8Array)) throw new RangeError('not a blob')
      deviceBusyMs = decodeFloat64s(row.device_busy_ms, loadBefore.length)
    } catch (e) {
      throw corrupt('device_busy_ms', e)
    }
    execution = {
      deviceBusyMs,
      criticalMs: Number(row.critical_ms),
      wallMs: Number(row.wall_ms),
      predictedMs: Number(row.predicted_ms),
      tokenBytes: Number(row.token_bytes),
      weightBytes: Number(row.weight_bytes),
      offloadBytes: Number(row.offload_bytes),
      partitions: Number(row.partitions),
      reuseStrategy: Number(row.reuse_strategy),
    }
  }
  return {
    imbalanceBefore: Number(row.imbalance_before),
    imbalanceAfter: Number(row.imbalance_after),
    spilledTokens: Number(row.spilled_tokens),
    movedExperts: Number(row.moved_experts),
    loadBefore,
    loadAfter: loads('load_after'),
    execution,
  }
}
