// The placement block at the end of a packed step record (native/addon/step_record_pack.h):
//   i32 n_devices (0 when experts run in the MoE layer itself: one device, no pipelining); when > 0:
//     f64[layers × 4] imbalance before, imbalance after, spilled tokens, moved experts;
//     f64[layers × 2 × n_devices] tokens per device before, then after;
//     i32[Σ experts] device of each expert's first rows (-1: no rows);
//     i32[Σ experts] tokens of each expert computed away from its home device;
//     i32 executed (1 when the engine measured how the layers ran on the devices, else 0); when 1:
//       f64[layers × (6 + n_devices)] per layer critical_ms, wall_ms, predicted_ms, token_bytes, weight_bytes,
//         offload_bytes, then device_busy_ms[n_devices];
//       i32[layers × 2] per layer partitions n, reuse strategy (0 none, 1..4 S1..S4);
//       f64[n_devices] device_peak_bytes.

export interface LayerExecution {
  /** [D] each device's time on its streams (CPU time on virtual devices), forward + backward. */
  deviceBusyMs: Float64Array
  /** The slowest device's pipelined time: what the layer's expert phase takes on D devices. */
  criticalMs: number
  /** Wall time of the expert phase in this process (the virtual devices share its cores). */
  wallMs: number
  /** Equation 10's forward + backward time for the chosen memory-reuse strategy (0: none). */
  predictedMs: number
  /** Token rows sent between devices (dispatch, return, re-sends). */
  tokenBytes: number
  /** Weights sent to experts' guest devices and gradients sent home. */
  weightBytes: number
  /** Activations offloaded to the host and restored by the memory-reuse strategy. */
  offloadBytes: number
  /** Pipeline partitions n. */
  partitions: number
  /** 0 none, 1..4 S1..S4. */
  reuseStrategy: number
}

export interface LayerPlacement {
  imbalanceBefore: number
  imbalanceAfter: number
  spilledTokens: number
  movedExperts: number
  loadBefore: Float64Array
  loadAfter: Float64Array
  expertDevice: Int32Array
  /** How the layer ran on the devices (when the engine measured it). */
  execution?: LayerExecution
}

export interface StepPlacement {
  devices: number
  layers: LayerPlacement[]
  /** [D] the largest each device's buffers grew to this step (with the layers' execution). */
  devicePeakBytes?: Float64Array
}

/** Layer scalars of the execution block before its devices' busy times. */
const EXECUTION_SCALARS = 6

/**
 * Whether the placement carries the execution block: every layer's execution and the devices' peaks, or none
 * of them (a part of it, or arrays not of D devices, throw).
 */
export function hasExecution(placement: StepPlacement): boolean {
  const d = placement.devices
  const some = placement.devicePeakBytes !== undefined || placement.layers.some((l) => l.execution !== undefined)
  if (!some) return false
  if (placement.devicePeakBytes?.length !== d || placement.layers.some((l) => l.execution?.deviceBusyMs.length !== d))
    throw new Error(`step record: the execution on ${d} devices needs every layer's deviceBusyMs and devicePeakBytes of ${d} devices`)
  return true
}

export function placementBytes(placement: StepPlacement | undefined, experts: number): number {
  if (!placement) return 4
  const layers = placement.layers.length
  const d = placement.devices
  const execution = hasExecution(placement) ? layers * 8 * (EXECUTION_SCALARS + d) + layers * 8 + 8 * d : 0
  return 4 + layers * 8 * (4 + 2 * d) + 8 * experts + 4 + execution
}

/**
 * Reads the block at `at`; returns it and each expert's spilled tokens per layer (undefined without placement)
 * and where it ends.
 */
export function decodePlacement(view: DataView, at: number, sizes: readonly number[]): { placement?: StepPlacement; spilledTokens?: Int32Array[]; end: number } {
  if (view.byteLength < at + 4) throw new Error(`step record: ${view.byteLength} bytes, expected at least ${at + 4}`)
  const devices = view.getInt32(at, true)
  let off = at + 4
  if (devices === 0) {
    if (view.byteLength !== off) throw new Error(`step record: ${view.byteLength} bytes, expected ${off}`)
    return { end: off }
  }
  const experts = sizes.reduce((a, b) => a + b, 0)
  const placed = off + sizes.length * 8 * (4 + 2 * devices) + 8 * experts
  const flagged = placed + 4
  const executed = devices > 0 && view.byteLength >= flagged && view.getInt32(placed, true) === 1
  const end = flagged + (executed ? sizes.length * 8 * (EXECUTION_SCALARS + devices) + sizes.length * 8 + 8 * devices : 0)
  if (devices < 0 || view.byteLength !== end)
    throw new Error(`step record: ${view.byteLength} bytes, expected ${end} for placement on ${devices} devices`)
  const f64 = () => { off += 8; return view.getFloat64(off - 8, true) }
  const i32 = () => { off += 4; return view.getInt32(off - 4, true) }
  const layers: LayerPlacement[] = sizes.map(() => ({
    imbalanceBefore: f64(), imbalanceAfter: f64(), spilledTokens: f64(), movedExperts: f64(),
    loadBefore: new Float64Array(devices), loadAfter: new Float64Array(devices), expertDevice: new Int32Array(0),
  }))
  for (const layer of layers) {
    for (let d = 0; d < devices; d++) layer.loadBefore[d] = f64()
    for (let d = 0; d < devices; d++) layer.loadAfter[d] = f64()
  }
  layers.forEach((layer, l) => {
    layer.expertDevice = Int32Array.from({ length: sizes[l]! }, i32)
  })
  const spilledTokens = sizes.map((n) => Int32Array.from({ length: n }, i32))
  off += 4
  if (!executed) return { placement: { devices, layers }, spilledTokens, end }
  for (const layer of layers) {
    const [criticalMs, wallMs, predictedMs, tokenBytes, weightBytes, offloadBytes] = Array.from({ length: EXECUTION_SCALARS }, f64) as [
      number, number, number, number, number, number,
    ]
    const deviceBusyMs = Float64Array.from({ length: devices }, f64)
    layer.execution = { deviceBusyMs, criticalMs, wallMs, predictedMs, tokenBytes, weightBytes, offloadBytes, partitions: 0, reuseStrategy: 0 }
  }
  for (const layer of layers) {
    layer.execution!.partitions = i32()
    layer.execution!.reuseStrategy = i32()
  }
  const devicePeakBytes = Float64Array.from({ length: devices }, f64)
  return { placement: { devices, layers, devicePeakBytes }, spilledTokens, end }
}

/** Writes the block at `at` (the buffer was sized with placementBytes); spilled tokens are 0 where not given. */
export function encodePlacement(view: DataView, at: number, placement: StepPlacement | undefined,
  spilledTokens?: readonly ArrayLike<number>[]): void {
  view.setInt32(at, placement?.devices ?? 0, true)
  if (!placement) return
  let off = at + 4
  const f64 = (v: number) => { view.setFloat64(off, v, true); off += 8 }
  const i32 = (v: number) => { view.setInt32(off, v, true); off += 4 }
  for (const l of placement.layers) [l.imbalanceBefore, l.imbalanceAfter, l.spilledTokens, l.movedExperts].forEach(f64)
  for (const l of placement.layers) { l.loadBefore.forEach(f64); l.loadAfter.forEach(f64) }
  for (const l of placement.layers) l.expertDevice.forEach(i32)
  placement.layers.forEach((l, i) => {
    const spilled = spilledTokens?.[i]
    for (let e = 0; e < l.expertDevice.length; e++) i32(spilled?.[e] ?? 0)
  })
  const executed = hasExecution(placement)
  i32(executed ? 1 : 0)
  if (!executed) return
  for (const { execution: x } of placement.layers) {
    ;[x!.criticalMs, x!.wallMs, x!.predictedMs, x!.tokenBytes, x!.weightBytes, x!.offloadBytes].forEach(f64)
    x!.deviceBusyMs.forEach(f64)
  }
  for (const { execution: x } of placement.layers) { i32(x!.partitions); i32(x!.reuseStrategy) }
  placement.devicePeakBytes!.forEach(f64)
}
