// The packed per-step record the engine thread hands to JS (one ArrayBuffer per step, see
// native/addon/step_record_pack.h): little-endian, version 1.
//   f64[11]: version, step, loss, aux_loss, lr, grad_norm, tokens, step_ms, forward_ms, backward_ms, optimizer_ms
//   i32: n_moe_layers, then i32[n_moe_layers] experts per layer, then i32[Σ experts] tokens per expert
export const STEP_RECORD_VERSION = 1
const SCALARS = 11

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
}

export function decodeStepRecord(buf: ArrayBuffer): EngineStepRecord {
  if (buf.byteLength < SCALARS * 8 + 4) throw new Error(`step record: ${buf.byteLength} bytes is too short`)
  const view = new DataView(buf)
  const f = (i: number) => view.getFloat64(i * 8, true)
  if (f(0) !== STEP_RECORD_VERSION) throw new Error(`step record: version ${f(0)}, expected ${STEP_RECORD_VERSION}`)
  let off = SCALARS * 8
  const layers = view.getInt32(off, true)
  off += 4
  const sizes: number[] = []
  for (let l = 0; l < layers; l++, off += 4) sizes.push(view.getInt32(off, true))
  const expected = off + sizes.reduce((a, b) => a + b, 0) * 4
  if (layers < 0 || buf.byteLength !== expected)
    throw new Error(`step record: ${buf.byteLength} bytes, expected ${expected} for ${layers} MoE layers`)
  const expertTokens = sizes.map((n) => {
    const a = new Int32Array(n)
    for (let e = 0; e < n; e++, off += 4) a[e] = view.getInt32(off, true)
    return a
  })
  return {
    step: f(1), loss: f(2), aux_loss: f(3), lr: f(4), grad_norm: f(5), tokens: f(6),
    step_ms: f(7), forward_ms: f(8), backward_ms: f(9), optimizer_ms: f(10), expertTokens,
  }
}

export function encodeStepRecord(r: EngineStepRecord): ArrayBuffer {
  const total = r.expertTokens.reduce((a, t) => a + t.length, 0)
  const buf = new ArrayBuffer(SCALARS * 8 + 4 + 4 * r.expertTokens.length + 4 * total)
  const view = new DataView(buf)
  const scalars = [STEP_RECORD_VERSION, r.step, r.loss, r.aux_loss, r.lr, r.grad_norm, r.tokens, r.step_ms,
    r.forward_ms, r.backward_ms, r.optimizer_ms]
  scalars.forEach((v, i) => view.setFloat64(i * 8, v, true))
  let off = SCALARS * 8
  view.setInt32(off, r.expertTokens.length, true)
  off += 4
  for (const t of r.expertTokens) view.setInt32((off += 4) - 4, t.length, true)
  for (const t of r.expertTokens) for (const v of t) view.setInt32((off += 4) - 4, v, true)
  return buf
}
