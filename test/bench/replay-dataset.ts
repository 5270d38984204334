// A synthetic finished run for the replay benchmark: 10,000 steps × 24 MoE layers × 64 experts, with
// skewed, drifting expert popularity and occasional bursts (the imbalance spikes), a greedy placement
// over 8 devices from the previous step's loads, the hottest quarter pinned, cold experts offloaded to
// host and SSD, and the tokens the hottest device cannot take spilled. Deterministic (seeded).
import { join } from 'node:path'

import { RunConfigSchema } from '../../main/api/config'
import { EXPERT_TIER, type StepTelemetry, type TelemetryStore } from '../../main/host/store/store'
import { placementOf } from './synthetic-placement'

export interface DatasetShape {
  steps: number
  layers: number
  experts: number
  devices: number
}

export const BENCH_SHAPE: DatasetShape = { steps: 10_000, layers: 24, experts: 64, devices: 8 }

const TOKENS_PER_STEP = 8192
const TOP_K = 2
const BATCH = 500

function lcg(seed: number): () => number {
  let s = seed >>> 0
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32)
}

// Expert popularity per layer: Zipf-like weights over a permutation that drifts slowly with the step.
function layerWeights(shape: DatasetShape, random: () => number): Float64Array[] {
  return Array.from({ length: shape.layers }, () => {
    const w = Float64Array.from({ length: shape.experts }, (_, e) => 1 / (1 + e) ** 0.8)
    for (let i = w.length - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1))
      ;[w[i], w[j]] = [w[j]!, w[i]!]
    }
    return w
  })
}

function greedyPlacement(previous: Int32Array, devices: number): Int32Array {
  const order = Array.from(previous.keys()).sort((a, b) => previous[b]! - previous[a]!)
  const load = new Float64Array(devices)
  const placement = new Int32Array(previous.length)
  for (const e of order) {
    let best = 0
    for (let d = 1; d < devices; d++) if (load[d]! < load[best]!) best = d
    placement[e] = best
    load[best]! += previous[e]!
  }
  return placement
}

export function syntheticSteps(shape: DatasetShape, first: number, count: number, weights: Float64Array[], previous: Int32Array[], random: () => number): StepTelemetry[] {
  const records: StepTelemetry[] = []
  const routed = TOKENS_PER_STEP * TOP_K
  const capacity = (routed / shape.devices) * 1.25
  for (let step = first; step < first + count; step++) {
    const expertTokens: Int32Array[] = []
    const devices: Int32Array[] = []
    const tiers: Int32Array[] = []
    const pins: Int32Array[] = []
    const spilledTokens: Int32Array[] = []
    for (let l = 0; l < shape.layers; l++) {
      const w = weights[l]!
      // Drift: one random pair of experts trades a little popularity every step.
      const a = Math.floor(random() * shape.experts)
      const b = Math.floor(random() * shape.experts)
      const moved = w[a]! * 0.02
      w[a]! -= moved
      w[b]! += moved
      const burst = random() < 0.004 ? Math.floor(random() * shape.experts) : -1
      const raw = Float64Array.from(w, (x, e) => x * (0.8 + 0.4 * random()) * (e === burst ? 8 : 1))
      const sum = raw.reduce((s, x) => s + x, 0)
      const tokens = Int32Array.from(raw, (x) => Math.round((x / sum) * routed))
      const place = greedyPlacement(previous[l]!, shape.devices)
      const hot = Array.from(previous[l]!.keys()).sort((x, y) => previous[l]![y]! - previous[l]![x]!)
      const rank = new Int32Array(shape.experts)
      hot.forEach((e, r) => (rank[e] = r))
      const pinned = Int32Array.from(rank, (r) => (r < shape.experts / 4 ? 1 : 0))
      const tier = Int32Array.from(rank, (r) =>
        r < shape.experts / 2 ? EXPERT_TIER.device : r < (shape.experts * 7) / 8 ? EXPERT_TIER.host : EXPERT_TIER.ssd,
      )
      const deviceLoad = new Float64Array(shape.devices)
      tokens.forEach((t, e) => (deviceLoad[place[e]!]! += t))
      const spilled = Int32Array.from(tokens, (t, e) => {
        const over = deviceLoad[place[e]!]! - capacity
        return over > 0 && rank[e]! < 4 ? Math.min(t, Math.round(over / 2)) : 0
      })
      expertTokens.push(tokens)
      devices.push(place)
      tiers.push(tier)
      pins.push(pinned)
      spilledTokens.push(spilled)
      previous[l] = tokens
    }
    records.push({
      step, loss: 5 * Math.exp(-step / 3000) + 1.5 + 0.05 * random(), aux_loss: 0.01, lr: 3e-4, grad_norm: 0.8, tokens: TOKENS_PER_STEP,
      step_ms: 900, forward_ms: 300, backward_ms: 500, optimizer_ms: 90, eval_loss: NaN,
      expertTokens, placement: placementOf(expertTokens, shape.devices, (l, e) => devices[l]![e]!), tiers, pins, spilledTokens,
    })
  }
  return records
}

/** Inserts a finished run `id` with the whole synthetic history into the store. */
export function writeSyntheticRun(store: TelemetryStore, dataDir: string, id: string, shape: DatasetShape = BENCH_SHAPE): void {
  const config = RunConfigSchema.parse({
    model: { arch: 'mixtral', d_model: 512, n_layers: shape.layers, n_heads: 8, d_ff: 1024, n_experts: shape.experts, top_k: TOP_K },
    train: { steps: shape.steps, batch_size: 32, seq_len: 256 },
    placement: { devices: shape.devices, policy: 'greedy' },
  })
  const now = Date.now()
  store.insertRun({
    id, name: `synthetic ${shape.steps / 1000}k × ${shape.layers} × ${shape.experts}`, status: 'finished', config,
    dataset: { path: 'synthetic' }, init: null, offload: null, runDir: join(dataDir, 'runs', id), createdAt: now, startedAt: now, finishedAt: now,
    step: 0, totalSteps: shape.steps, lastLoss: null, tokensPerSec: null, error: null,
  })
  const random = lcg(20_240_601)
  const weights = layerWeights(shape, random)
  const previous = Array.from({ length: shape.layers }, () => new Int32Array(shape.experts).fill(Math.round((TOKENS_PER_STEP * TOP_K) / shape.experts)))
  for (let first = 1; first <= shape.steps; first += BATCH) {
    const records = syntheticSteps(shape, first, Math.min(BATCH, shape.steps - first + 1), weights, previous, random)
    store.appendSteps(id, records, records.map((r) => now - (shape.steps - r.step) * 900))
  }
}
