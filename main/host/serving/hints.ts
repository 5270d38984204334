// Serving hints from a run's recorded expert loads (the telemetry no other tool has), for the engines people
// serve MoE models with:
//   - SGLang's --init-expert-location: {"logical_count": [[tokens per expert] per model layer]} (its EPLB
//     rebalancer places and replicates experts from these counts; dense layers are rows of zeros);
//   - llama.cpp's --override-tensor (-ot): which layers' expert tensors (blk.N.ffn_*_exps, one 3-D tensor per
//     layer and projection) stay on the GPU within a VRAM budget, the rest on the CPU, with the share of the
//     routed expert traffic the GPU then serves;
//   - the hot experts the engine's own pinning would keep on the device, by its pin policy over the range.
// Pure functions of the loads; the host gathers them (serving/gather.ts).

export type PinPolicyName = 'previous' | 'ema' | 'sum'

export interface LayerLoads {
  /** The model layer this MoE layer is (dense layers have none). */
  layer: number
  /** [step][expert] tokens routed to each expert at each step of the range, oldest first. */
  steps: number[][]
  /** Bytes of this layer's routed expert tensors as the serving engine stores them. */
  expertBytes: number
}

export interface HintInput {
  nLayers: number
  layers: LayerLoads[]
}

/** SGLang's init_by_eplb input: the summed tokens per expert for every model layer. */
export function sglangExpertLocation(input: HintInput): { logical_count: number[][] } {
  const width = Math.max(0, ...input.layers.map((l) => l.steps[0]?.length ?? 0))
  const rows = Array.from({ length: input.nLayers }, () => new Array<number>(width).fill(0))
  for (const l of input.layers) for (const step of l.steps) step.forEach((t, e) => (rows[l.layer]![e]! += t))
  return { logical_count: rows }
}

export interface LlamaCppHint {
  /** Model layers whose expert tensors stay on the GPU, ascending. */
  gpuLayers: number[]
  gpuBytes: number
  /** Share of the routed assignments (tokens × experts) over the range that the GPU layers served. */
  trafficOnGpu: number
  /** The arguments, as typed on a shell command line. */
  args: string
}

/**
 * Layers by traffic served per byte, greedily, while they fit the budget: under dropless top-k routing every
 * MoE layer carries the same traffic (tokens × k), so this keeps the smallest expert layers first; with
 * capacity drops or expert counts that differ per layer, the busiest per byte.
 */
export function llamaCppOverride(input: HintInput, vramBytes: number, device = 'CUDA0'): LlamaCppHint {
  const traffic = input.layers.map((l) => l.steps.reduce((sum, s) => sum + s.reduce((a, b) => a + b, 0), 0))
  const total = traffic.reduce((a, b) => a + b, 0)
  const order = input.layers
    .map((l, i) => ({ l, t: traffic[i]! }))
    .sort((a, b) => b.t / Math.max(1, b.l.expertBytes) - a.t / Math.max(1, a.l.expertBytes) || a.l.layer - b.l.layer)
  const chosen: LayerLoads[] = []
  let bytes = 0
  let served = 0
  for (const { l, t } of order) {
    if (bytes + l.expertBytes > vramBytes) continue
    chosen.push(l)
    bytes += l.expertBytes
    served += t
  }
  const gpuLayers = chosen.map((l) => l.layer).sort((a, b) => a - b)
  const onGpu = gpuLayers.length ? [`-ot "blk\\.(${gpuLayers.join('|')})\\.ffn_(gate|up|down)_exps\\.=${device}"`] : []
  return {
    gpuLayers,
    gpuBytes: bytes,
    trafficOnGpu: total > 0 ? served / total : 0,
    // The first matching pattern wins: the chosen layers' experts on the GPU, every other expert tensor on the CPU,
    // everything else (attention, norms, shared experts) offloaded with -ngl.
    args: ['-ngl 999', ...onGpu, '-ot "ffn_(gate|up|down)_exps\\.=CPU"'].join(' '),
  }
}

export interface HotExperts {
  policy: PinPolicyName
  pinSlots: number
  /** Per MoE layer, its pinned experts (ascending) with their share of that layer's tokens over the range. */
  layers: { layer: number; experts: number[]; share: number }[]
}

// The engine's EMA weight of the newest step (offload/pin_selector.h).
const EMA_WEIGHT = 0.5

/**
 * The experts the engine's pinning would keep after the range's last step: the pinSlots highest scores over all
 * MoE layers together (ties: lower layer, then lower expert), scoring by the last step (previous), an EMA of
 * the steps (ema), or the sum over the range (sum: for a run trained without pinning).
 */
export function hotExperts(input: HintInput, pinSlots: number, policy: PinPolicyName): HotExperts {
  const scored: { li: number; e: number; score: number }[] = []
  input.layers.forEach((l, li) => {
    const E = l.steps[0]?.length ?? 0
    for (let e = 0; e < E; e++) {
      let score = 0
      if (policy === 'previous') score = l.steps.at(-1)?.[e] ?? 0
      else if (policy === 'ema') for (const s of l.steps) score = (1 - EMA_WEIGHT) * score + EMA_WEIGHT * s[e]!
      else for (const s of l.steps) score += s[e]!
      if (score > 0) scored.push({ li, e, score })
    }
  })
  scored.sort((a, b) => b.score - a.score || a.li - b.li || a.e - b.e)
  const pinned = scored.slice(0, Math.max(0, pinSlots))
  return {
    policy,
    pinSlots,
    layers: input.layers.map((l, li) => {
      const experts = pinned.filter((p) => p.li === li).map((p) => p.e).sort((a, b) => a - b)
      const tokens = l.steps.reduce((sum, s) => sum + s.reduce((a, b) => a + b, 0), 0)
      const hot = l.steps.reduce((sum, s) => sum + experts.reduce((a, e) => a + s[e]!, 0), 0)
      return { layer: l.layer, experts, share: tokens > 0 ? hot / tokens : 0 }
    }),
  }
}
