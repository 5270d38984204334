// A step's placement across devices (StepTelemetry.placement) <-> rows of `layer_placements`, one per MoE
// layer: the engine's imbalance, spilled tokens and weight copies as columns (read as series without
// decoding anything), and the tokens per device before and after as one-row int32 layered blobs (blobs.ts).
import { encodeLayered, layeredArrays, viewLayered } from './blobs'
import type { SqlRow, SqlValue } from './db'
import { StoreError } from './errors'
import type { StepTelemetry } from './types'

export const INSERT_PLACEMENT_SQL =
  `INSERT INTO layer_placements (run_id, step, layer, imbalance_before, imbalance_after, spilled_tokens, moved_experts,
   load_before, load_after) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`

/** One MoE layer's placement at one step, as stored. */
export interface LayerDevices {
  imbalanceBefore: number
  imbalanceAfter: number
  spilledTokens: number
  movedExperts: number
  loadBefore: Int32Array
  loadAfter: Int32Array
}

/** The values of the step's layer_placements rows; none without a placement. */
export function encodePlacement(runId: string, r: StepTelemetry): SqlValue[][] {
  const p = r.placement
  if (!p) return []
  const where = `run ${runId} step ${r.step}: placement`
  if (!Number.isInteger(p.devices) || p.devices < 2) throw new StoreError(`${where} has ${p.devices} devices; placing needs at least 2`)
  if (p.layers.length !== r.expertTokens.length)
    throw new StoreError(`${where} has ${p.layers.length} layers, expertTokens ${r.expertTokens.length}`)
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
      loads('loadBefore', l.loadBefore), loads('loadAfter', l.loadAfter)]
  })
}

/** A layer_placements row (every column) as the layer's placement; a corrupt load blob is named. */
export function decodeLayerDevices(runId: string, row: SqlRow): LayerDevices {
  const loads = (column: 'load_before' | 'load_after') => {
    const blob = row[column]
    try {
      if (!(blob instanceof Uint8Array)) throw new RangeError('not a blob')
      const view = viewLayered(blob)
      if (view.layers !== 1) throw new RangeError(`${view.layers} rows, expected 1`)
      return layeredArrays(view)[0]!
    } catch (e) {
      throw new StoreError(`run ${runId} step ${Number(row.step)} layer ${Number(row.layer)}: layer_placements.${column} is corrupt: ${(e as Error).message}`)
    }
  }
  return {
    imbalanceBefore: Number(row.imbalance_before),
    imbalanceAfter: Number(row.imbalance_after),
    spilledTokens: Number(row.spilled_tokens),
    movedExperts: Number(row.moved_experts),
    loadBefore: loads('load_before'),
    loadAfter: loads('load_after'),
  }
}
