// A step's placement across devices in the shape the engine records it (StepTelemetry.placement), built
// from any expert -> device choice: static homes e mod D before, each expert's tokens on its device after,
// max/mean of both, and the tokens and experts away from their home. For synthetic runs and store tests.
import type { StepTelemetry } from '../../main/host/store/store'

export type StepPlacement = NonNullable<StepTelemetry['placement']>

const maxOverMean = (loads: Float64Array) => {
  const sum = loads.reduce((a, b) => a + b, 0)
  return sum > 0 ? (Math.max(...loads) * loads.length) / sum : 1
}

/**
 * Expert e of MoE layer l on device deviceOf(l, e) (by default one past its home, so every expert moves);
 * an expert without tokens has no device (-1), as in the engine's records.
 */
export function placementOf(
  expertTokens: readonly ArrayLike<number>[],
  devices: number,
  deviceOf = (l: number, e: number) => (e + l + 1) % devices,
): StepPlacement {
  return {
    devices,
    layers: Array.from(expertTokens, (tokens, l) => {
      const loadBefore = new Float64Array(devices)
      const loadAfter = new Float64Array(devices)
      const expertDevice = new Int32Array(tokens.length)
      let spilledTokens = 0
      let movedExperts = 0
      for (let e = 0; e < tokens.length; e++) {
        const t = tokens[e]!
        const d = t > 0 ? deviceOf(l, e) : -1
        expertDevice[e] = d
        loadBefore[e % devices]! += t
        if (d < 0) continue
        loadAfter[d]! += t
        if (d !== e % devices) {
          spilledTokens += t
          movedExperts++
        }
      }
      return { imbalanceBefore: maxOverMean(loadBefore), imbalanceAfter: maxOverMean(loadAfter), spilledTokens, movedExperts, loadBefore, loadAfter, expertDevice }
    }),
  }
}
