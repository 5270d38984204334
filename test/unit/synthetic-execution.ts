// How each MoE layer ran on the devices (step record version 5), made up for a placement built by
// test/bench/synthetic-placement.ts: busy time per device proportional to its tokens after placement, the
// critical time the busiest device's, bytes from the tokens moved, and a pipeline of `partitions` with
// memory-reuse strategy `reuse`. Deterministic in the step, so a test can recompute what it wrote.
import type { LayerExecution, LayerPlacement } from '../../main/host/engine/step-record-placement'
import type { StepPlacement } from '../bench/synthetic-placement'

/** A placement whose every layer says how it ran, with the devices' peak bytes. */
export interface ExecutedPlacement extends StepPlacement {
  layers: (LayerPlacement & { execution: LayerExecution })[]
  devicePeakBytes: Float64Array
}

export interface ExecutionOptions {
  partitions?: number
  reuse?: number
  /** Added to every time, so different steps differ. */
  step?: number
}

export function withExecution(placement: StepPlacement, options: ExecutionOptions = {}): ExecutedPlacement {
  const { partitions = 4, reuse = 2, step = 0 } = options
  const layers = placement.layers.map((layer, l) => {
    const deviceBusyMs = Float64Array.from(layer.loadAfter, (tokens) => tokens / 100 + 0.25 * l + step / 8)
    const criticalMs = Math.max(...deviceBusyMs) * 0.75
    return {
      ...layer,
      execution: {
        deviceBusyMs,
        criticalMs,
        wallMs: criticalMs * 2.5,
        predictedMs: reuse > 0 ? criticalMs * 1.125 : 0,
        tokenBytes: layer.spilledTokens * 2 * 256 + 4096 * (l + 1),
        weightBytes: layer.movedExperts * 3 * 2 ** 20,
        offloadBytes: reuse === 1 || reuse === 3 ? 2 ** 33 + l : 0,
        partitions,
        reuseStrategy: reuse,
      },
    }
  })
  const devicePeakBytes = Float64Array.from({ length: placement.devices }, (_, d) => 2 ** 32 + d * 2 ** 20 + step)
  return { ...placement, layers, devicePeakBytes }
}
