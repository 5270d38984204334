// The packed per-step record the engine thread hands to JS (one ArrayBuffer per step, see
// native/addon/step_record_pack.h): little-endian, version 5 (version 4 still decodes: its placement block
// has no execution part).
//   f64[11]: version, step, loss, aux_loss, lr, grad_norm, tokens, step_ms, forward_ms, backward_ms, optimizer_ms
//   i32: n_moe_layers, then i32[n_moe_layers] experts per layer, then i32[Σ experts] tokens per expert
//   f64[15]: offloaded (0 or 1), upload_ms, upload_hidden_ms, stall_ms, bytes_h2d, bytes_d2h, peak_device_bytes,
//            peak_host_bytes, peak_ssd_bytes, ssd_ms, bytes_ssd_read, bytes_ssd_write, cache_hits, cache_misses,
//            prefetch_lead_ms
//   when offloaded: u8[Σ experts] home tier (EXPERT_TIER code), then u8[Σ experts] pinned flag
//   the placement block (step-record-placement.ts; version 5 adds how each MoE layer ran on the devices)
// The offload fields are named as StepTelemetry's, so a decoded record is stored as it is.
import { decodePlacement, encodePlacement, placementBytes, type StepPlacement } from './step-record-placement'

export const STEP_RECORD_VERSION = 5
/** Versions decodeStepRecord reads: 4 (placement without execution) and this one. */
export const STEP_RECORD_VERSIONS: readonly number[] = [4, 5]
const SCALARS = 11
const OFFLOAD_SCALARS = 15
const OFFLOAD_FIELDS = ['upload_ms', 'upload_hidden_ms', 'stall_ms', 'bytes_h2d', 'bytes_d2h', 'peak_device_bytes',
  'peak_host_bytes', 'peak_ssd_bytes', 'ssd_ms', 'bytes_ssd_read', 'bytes_ssd_write', 'cache_hits', 'cache_misses',
  'prefetch_lead_ms'] as const

export interface EngineStepRecord {
  step: number
  loss: number
  aux_loss: number
  lr: number
  grad_norm: number
  tokens: number
  step_ms: number
  forward_ms: number
  backward_ms: number
  optimizer_ms: number
  expertTokens: Int32Array[] // [MoE layer] tokens per expert
  // Expert offload (docs/offload.md): present only for offloaded steps.
  upload_ms?: number
  upload_hidden_ms?: number
  stall_ms?: number
  bytes_h2d?: number
  bytes_d2h?: number
  peak_device_bytes?: number
  peak_host_bytes?: number
  // SSD tier: zero on the host tier.
  peak_ssd_bytes?: number
  ssd_ms?: number
  bytes_ssd_read?: number
  bytes_ssd_write?: number
  cache_hits?: number
  cache_misses?: number
  /** Mean ms a prefetched expert waited in the host cache before its first use. */
  prefetch_lead_ms?: number
  /** [MoE layer][expert] EXPERT_TIER code of the expert's home. */
  tiers?: readonly ArrayLike<number>[]
  /** [MoE layer][expert] 1 when the expert was pinned, else 0. */
  pins?: readonly ArrayLike<number>[]
  /** Placement across devices: present when experts run on the devices (more than one, or pipelined on one). */
  placement?: StepPlacement
}

export function decodeStepRecord(buf: ArrayBuffer): EngineStepRecord {
  if (buf.byteLength < SCALARS * 8 + 4) throw new Error(`step record: ${buf.byteLength} bytes is too short`)
  const view = new DataView(buf)
  const f = (i: number) => view.getFloat64(i * 8, true)
  const version = f(0)
  if (!STEP_RECORD_VERSIONS.includes(version))
    throw new Error(`step record: version ${version}, expected one of ${STEP_RECORD_VERSIONS.join(', ')}`)
  let off = SCALARS * 8
  const layers = view.getInt32(off, true)
  off += 4
  if (layers < 0 || buf.byteLength < off + layers * 4)
    throw new Error(`step record: ${buf.byteLength} bytes, too short for ${layers} MoE layers`)
  const sizes: number[] = []
  for (let l = 0; l < layers; l++, off += 4) sizes.push(view.getInt32(off, true))
  const experts = sizes.reduce((a, b) => a + b, 0)
  const offloadAt = off + experts * 4
  const offloaded = buf.byteLength >= offloadAt + OFFLOAD_SCALARS * 8 && view.getFloat64(offloadAt, true) === 1
  const placementAt = offloadAt + OFFLOAD_SCALARS * 8 + (offloaded ? 2 * experts : 0)
  const { placement } = decodePlacement(view, placementAt, sizes, version)
  const expertTokens = sizes.map((n) => {
    const a = new Int32Array(n)
    for (let e = 0; e < n; e++, off += 4) a[e] = view.getInt32(off, true)
    return a
  })
  const record: EngineStepRecord = {
    step: f(1), loss: f(2), aux_loss: f(3), lr: f(4), grad_norm: f(5), tokens: f(6),
    step_ms: f(7), forward_ms: f(8), backward_ms: f(9), optimizer_ms: f(10), expertTokens,
  }
  if (placement) record.placement = placement
  if (!offloaded) return record
  OFFLOAD_FIELDS.forEach((name, i) => { record[name] = view.getFloat64(offloadAt + 8 * (i + 1), true) })
  let bytesAt = offloadAt + OFFLOAD_SCALARS * 8
  const perLayer = () => sizes.map((n) => {
    const a = new Uint8Array(buf.slice(bytesAt, bytesAt + n))
    bytesAt += n
    return a
  })
  record.tiers = perLayer()
  record.pins = perLayer()
  return record
}

export function encodeStepRecord(r: EngineStepRecord): ArrayBuffer {
  const total = r.expertTokens.reduce((a, t) => a + t.length, 0)
  const offloaded = r.tiers !== undefined && r.pins !== undefined
  const placementAt = SCALARS * 8 + 4 + 4 * r.expertTokens.length + 4 * total + OFFLOAD_SCALARS * 8 +
    (offloaded ? 2 * total : 0)
  const buf = new ArrayBuffer(placementAt + placementBytes(r.placement, total))
  const view = new DataView(buf)
  const scalars = [STEP_RECORD_VERSION, r.step, r.loss, r.aux_loss, r.lr, r.grad_norm, r.tokens, r.step_ms,
    r.forward_ms, r.backward_ms, r.optimizer_ms]
  scalars.forEach((v, i) => view.setFloat64(i * 8, v, true))
  let off = SCALARS * 8
  view.setInt32(off, r.expertTokens.length, true)
  off += 4
  for (const t of r.expertTokens) view.setInt32((off += 4) - 4, t.length, true)
  for (const t of r.expertTokens) for (const v of t) view.setInt32((off += 4) - 4, v, true)
  const offload = offloaded ? [1, ...OFFLOAD_FIELDS.map((name) => r[name] ?? 0)] : new Array(OFFLOAD_SCALARS).fill(0)
  for (const v of offload) view.setFloat64((off += 8) - 8, v, true)
  if (offloaded) for (const layers of [r.tiers!, r.pins!]) for (const l of layers) for (let e = 0; e < l.length; e++) view.setUint8(off++, l[e])
  encodePlacement(view, placementAt, r.placement)
  return buf
}
