// The packed per-step record the engine thread hands to JS (one ArrayBuffer per step, see
// native/addon/step_record_pack.h): little-endian, version 7.
//   f64: version; f64: S, the number of scalars; f64[S]: STEP_FIELDS in order (step-fields.ts, generated from the
//        engine's table), the offload-only fields 0 when not offloaded
//   i32: offloaded (0 or 1)
//   i32: n_moe_layers, then i32[n_moe_layers] experts per layer, then i32[Σ experts] tokens per expert
//   when offloaded: u8[Σ experts] home tier (EXPERT_TIER code), then u8[Σ experts] pinned flag
//   i32: biased (1 when the model has a router selection bias); when 1: f32[Σ experts] the bias after the step
//   the placement block (step-record-placement.ts), with each expert's spilled tokens
// The scalars are named as StepTelemetry's and the `steps` columns, so a decoded record is stored as it is.
import {
  OFFLOAD_FIELD_NAMES, STEP_FIELDS, type AlwaysFieldName, type OffloadFieldName,
} from '../../api/step-fields'
import { decodePlacement, encodePlacement, placementBytes, type StepPlacement } from './step-record-placement'

export const STEP_RECORD_VERSION = 7
const OFFLOAD_ONLY = new Set<string>(OFFLOAD_FIELD_NAMES)
const HEADER = 2 + STEP_FIELDS.length // version, S, scalars

/** A step as the engine records it: every always-recorded scalar, the offload-only ones on offloaded steps. */
export type EngineStepRecord = { [K in AlwaysFieldName]: number } & { [K in OffloadFieldName]?: number } & {
  expertTokens: Int32Array[] // [MoE layer] tokens per expert
  /** [MoE layer][expert] EXPERT_TIER code of the expert's home (offloaded steps). */
  tiers?: readonly ArrayLike<number>[]
  /** [MoE layer][expert] 1 when the expert was pinned, else 0 (offloaded steps). */
  pins?: readonly ArrayLike<number>[]
  /** [MoE layer][expert] each expert's router selection bias after the step (models with model.selection_bias). */
  selectionBias?: readonly ArrayLike<number>[]
  /** Placement across devices: present when experts run on the devices (more than one, or pipelined on one). */
  placement?: StepPlacement
  /** [MoE layer][expert] tokens of the expert computed away from its home device (with placement). */
  spilledTokens?: readonly ArrayLike<number>[]
}

export function decodeStepRecord(buf: ArrayBuffer): EngineStepRecord {
  if (buf.byteLength < 16) throw new Error(`step record: ${buf.byteLength} bytes is too short`)
  const view = new DataView(buf)
  const version = view.getFloat64(0, true)
  if (version !== STEP_RECORD_VERSION) throw new Error(`step record: version ${version}, expected ${STEP_RECORD_VERSION}`)
  const scalars = view.getFloat64(8, true)
  if (scalars !== STEP_FIELDS.length)
    throw new Error(`step record: ${scalars} scalars, this build knows ${STEP_FIELDS.length} (an engine of another build?)`)
  let off = HEADER * 8
  if (buf.byteLength < off + 8) throw new Error(`step record: ${buf.byteLength} bytes, expected at least ${off + 8}`)
  const offloaded = view.getInt32(off, true) === 1
  const layers = view.getInt32(off + 4, true)
  off += 8
  if (layers < 0 || buf.byteLength < off + layers * 4)
    throw new Error(`step record: ${buf.byteLength} bytes, too short for ${layers} MoE layers`)
  const sizes: number[] = []
  for (let l = 0; l < layers; l++, off += 4) sizes.push(view.getInt32(off, true))
  const experts = sizes.reduce((a, b) => a + b, 0)
  const biasAt = off + experts * 4 + (offloaded ? 2 * experts : 0)
  if (buf.byteLength < biasAt + 4) throw new Error(`step record: ${buf.byteLength} bytes, too short for its bias flag`)
  const biased = view.getInt32(biasAt, true) === 1
  const placementAt = biasAt + 4 + (biased ? 4 * experts : 0)
  const { placement, spilledTokens } = decodePlacement(view, placementAt, sizes)
  const record = { expertTokens: sizes.map(() => new Int32Array(0)) } as EngineStepRecord
  const values = record as unknown as Record<string, number>
  STEP_FIELDS.forEach(({ name }, i) => {
    if (offloaded || !OFFLOAD_ONLY.has(name)) values[name] = view.getFloat64(16 + 8 * i, true)
  })
  record.expertTokens = sizes.map((n) => {
    const a = new Int32Array(n)
    for (let e = 0; e < n; e++, off += 4) a[e] = view.getInt32(off, true)
    return a
  })
  if (placement) {
    record.placement = placement
    record.spilledTokens = spilledTokens
  }
  if (biased) {
    let at = biasAt + 4
    record.selectionBias = sizes.map((n) => {
      const a = new Float32Array(n)
      for (let e = 0; e < n; e++, at += 4) a[e] = view.getFloat32(at, true)
      return a
    })
  }
  if (!offloaded) return record
  const perLayer = () => sizes.map((n) => {
    const a = new Uint8Array(buf.slice(off, off + n))
    off += n
    return a
  })
  record.tiers = perLayer()
  record.pins = perLayer()
  return record
}

export function encodeStepRecord(r: EngineStepRecord): ArrayBuffer {
  const total = r.expertTokens.reduce((a, t) => a + t.length, 0)
  const offloaded = r.tiers !== undefined && r.pins !== undefined
  const biasAt = HEADER * 8 + 8 + 4 * r.expertTokens.length + 4 * total + (offloaded ? 2 * total : 0)
  const placementAt = biasAt + 4 + (r.selectionBias ? 4 * total : 0)
  const buf = new ArrayBuffer(placementAt + placementBytes(r.placement, total))
  const view = new DataView(buf)
  const values = r as unknown as Record<string, number | undefined>
  view.setFloat64(0, STEP_RECORD_VERSION, true)
  view.setFloat64(8, STEP_FIELDS.length, true)
  STEP_FIELDS.forEach(({ name }, i) => {
    view.setFloat64(16 + 8 * i, offloaded || !OFFLOAD_ONLY.has(name) ? (values[name] ?? 0) : 0, true)
  })
  let off = HEADER * 8
  view.setInt32(off, offloaded ? 1 : 0, true)
  view.setInt32(off + 4, r.expertTokens.length, true)
  off += 8
  for (const t of r.expertTokens) view.setInt32((off += 4) - 4, t.length, true)
  for (const t of r.expertTokens) for (const v of t) view.setInt32((off += 4) - 4, v, true)
  if (offloaded) for (const layers of [r.tiers!, r.pins!]) for (const l of layers) for (let e = 0; e < l.length; e++) view.setUint8(off++, l[e])
  view.setInt32(biasAt, r.selectionBias ? 1 : 0, true)
  let at = biasAt + 4
  if (r.selectionBias) for (const l of r.selectionBias) for (let e = 0; e < l.length; e++, at += 4) view.setFloat32(at, l[e]!, true)
  encodePlacement(view, placementAt, r.placement, r.spilledTokens)
  return buf
}
