// The router's selection bias of one layer over steps, as a heatmap beside the loads: each expert's bias after
// each step (the load-balancing update moves it toward the experts that got fewer tokens). Every bias of a layer
// may drift together, and only their differences choose experts, so the colour scale spans the window's lowest to
// highest bias rather than a fixed range around zero.
import type { Result } from '../../main/api/contract'
import type { HeatmapInput } from '../charts/replay-heatmap'

type ExpertLoad = Result<'metrics.expertLoad'>

/** The heatmap input of the layer's bias, or null when the run records none. */
export function biasHeatmapInput(load: ExpertLoad, bucketSize: number): HeatmapInput | null {
  const bias = load.bias
  if (!bias || load.steps.length === 0) return null
  let lo = Infinity
  let hi = -Infinity
  for (const v of bias) {
    lo = Math.min(lo, v)
    hi = Math.max(hi, v)
  }
  return {
    steps: load.steps,
    experts: load.experts,
    counts: Float64Array.from(bias, (v) => v - lo),
    bucketSize,
    values: 'bias',
    floor: lo,
    // All equal: one colour (the scale's bottom) rather than a division by zero.
    top: hi > lo ? hi - lo : 1,
  }
}

/** The bias range of the input, for the heading: "−2.000e-3 … +5.000e-3". */
export function biasRange(input: HeatmapInput): { lo: number; hi: number } {
  const lo = input.floor ?? 0
  let span = 0
  for (let i = 0; i < input.counts.length; i++) span = Math.max(span, input.counts[i]!)
  return { lo, hi: lo + span }
}
