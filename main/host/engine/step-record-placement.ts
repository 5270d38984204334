// The placement block at the end of a packed step record (version 4, native/addon/step_record_pack.h):
//   i32 n_devices (0 without placement); when > 0: f64[layers × 4] imbalance before, imbalance after, spilled
//   tokens, moved experts; f64[layers × 2 × n_devices] tokens per device before, then after; i32[Σ experts]
//   device of each expert's first rows (-1: no rows).

export interface LayerPlacement {
  imbalanceBefore: number
  imbalanceAfter: number
  spilledTokens: number
  movedExperts: number
  loadBefore: Float64Array
  loadAfter: Float64Array
  expertDevice: Int32Array
}

export interface StepPlacement {
  devices: number
  layers: LayerPlacement[]
}

export function placementBytes(placement: StepPlacement | undefined, experts: number): number {
  if (!placement) return 4
  return 4 + placement.layers.length * 8 * (4 + 2 * placement.devices) + 4 * experts
}

/** Reads the block at `at`; returns it (undefined without placement) and where it ends. */
export function decodePlacement(view: DataView, at: number, sizes: readonly number[]): { placement?: StepPlacement; end: number } {
  if (view.byteLength < at + 4) throw new Error(`step record: ${view.byteLength} bytes, expected at least ${at + 4}`)
  const devices = view.getInt32(at, true)
  let off = at + 4
  if (devices === 0) {
    if (view.byteLength !== off) throw new Error(`step record: ${view.byteLength} bytes, expected ${off}`)
    return { end: off }
  }
  const experts = sizes.reduce((a, b) => a + b, 0)
  const end = off + sizes.length * 8 * (4 + 2 * devices) + 4 * experts
  if (devices < 0 || view.byteLength !== end)
    throw new Error(`step record: ${view.byteLength} bytes, expected ${end} for placement on ${devices} devices`)
  const f64 = () => { off += 8; return view.getFloat64(off - 8, true) }
  const layers: LayerPlacement[] = sizes.map(() => ({
    imbalanceBefore: f64(), imbalanceAfter: f64(), spilledTokens: f64(), movedExperts: f64(),
    loadBefore: new Float64Array(devices), loadAfter: new Float64Array(devices), expertDevice: new Int32Array(0),
  }))
  for (const layer of layers) {
    for (let d = 0; d < devices; d++) layer.loadBefore[d] = f64()
    for (let d = 0; d < devices; d++) layer.loadAfter[d] = f64()
  }
  layers.forEach((layer, l) => {
    layer.expertDevice = new Int32Array(sizes[l]!)
    for (let e = 0; e < sizes[l]!; e++, off += 4) layer.expertDevice[e] = view.getInt32(off, true)
  })
  return { placement: { devices, layers }, end }
}

/** Writes the block at `at` (the buffer was sized with placementBytes). */
export function encodePlacement(view: DataView, at: number, placement: StepPlacement | undefined): void {
  view.setInt32(at, placement?.devices ?? 0, true)
  if (!placement) return
  let off = at + 4
  const f64 = (v: number) => { view.setFloat64(off, v, true); off += 8 }
  for (const l of placement.layers) [l.imbalanceBefore, l.imbalanceAfter, l.spilledTokens, l.movedExperts].forEach(f64)
  for (const l of placement.layers) { l.loadBefore.forEach(f64); l.loadAfter.forEach(f64) }
  for (const l of placement.layers) for (const d of l.expertDevice) { view.setInt32(off, d, true); off += 4 }
}
