// Bytes per tier for each placement of expert state, as the engine books them
// (native/engine/offload/expert_offload.cpp and ssd_store.cpp). Every state is fp32: parameters,
// gradients and two AdamW moments, so a trained parameter costs 4 copies × 4 bytes wherever it lives; under a
// finetune section a frozen one costs its weights alone (no gradient, no moments), also for offloaded experts.
import type { RunConfig } from '../../api/config'
import type { Plan } from '../../api/contract'
import { activationFloats } from './activations'
import { bf16CopyParams, frozenLinearParams, stateFloats } from './finetune-plan'
import { countParams } from './param-count'

export type TierBytes = Plan['tiers'][number]

const F32 = 4
/** Each part of an SSD record (weights, gradient, two moments) is 4096-aligned for direct I/O. */
export const SSD_ALIGN = 4096

export interface Sizes {
  /** One copy of the non-expert parameters (the arena minus every expert range). */
  dense: number
  /** The trained part of `dense`: its gradient and each moment (= dense without a finetune section). */
  denseTrained: number
  /** The largest routed expert's weights. */
  expert: number
  /** A slot's fp32 weights buffer: `expert`, or under bf16 compute the largest expert's tensors other than its two
   * linear weights (biases, adapters), which a slot keeps only in its bf16 copy. */
  slotWeights: number
  /** The largest routed expert's trained part: a slot's gradient buffer (= expert without a finetune section). */
  expertTrained: number
  /** One copy of every routed expert's weights. */
  allExperts: number
  /** Every routed expert's trained part: the gradients, and each moment, of the expert homes. */
  allExpertsTrained: number
  /** Routed experts over all MoE layers. */
  experts: number
  /** One host cache entry: the largest record's parts (weights, gradient, 2 moments), each rounded up to SSD_ALIGN. */
  record: number
  /** The SSD file: every expert's record, each part sized for that expert. */
  ssdFile: number
  /** SSD mode: the trained part of the experts that also have frozen tensors (LoRA adapters on a frozen base), whose
   * weights, gradient and moments stay in host memory beside the cache (4 copies). */
  sideTrained: number
  /** bf16 compute: the bf16 copy of the whole arena (2 B per parameter) and, on the CPU backend, the frozen linear
   * weights packed for its GEMMs (two layouts of 2 B each; not with train.pack_frozen_bf16 false); 0 in fp32. */
  bf16Copies: number
  /** bf16 compute with offloaded experts: the non-expert linear weights' bf16 copies (2 B each, padded to 16) and
   * on the CPU backend the frozen ones packed as above; the experts' copies are in their slots. 0 in fp32. */
  bf16Dense: number
  /** bf16 compute: a slot's bf16 copy of its expert's two linear weights (2 B each, the largest expert's, padded as
   * the layout pads them); 0 in fp32. */
  expertBf16: number
  activations: number
  buffers: number
}

const aligned = (bytes: number) => Math.ceil(bytes / SSD_ALIGN) * SSD_ALIGN

/** One expert's record parts in bytes: weights and gradient (also each moment's size); an expert with trained and
 * frozen tensors keeps its trained part in host memory, so its record is its weights. */
const recordParts = (weights: number, trained: number, split: boolean) =>
  ({ weights: aligned(weights), grad: split ? 0 : aligned(trained) })
const recordBytes = (p: ReturnType<typeof recordParts>) => p.weights + 3 * p.grad

export function sizesOf(config: RunConfig): Sizes {
  const s = stateSizesOf(config)
  const bf16 = config.train.compute_dtype === 'bf16'
  const experts = bf16 ? stateFloats(config).experts : []
  return {
    ...s,
    bf16Copies: bf16 ? (s.dense + s.allExperts) / 2 + packedBytes(config, true) : 0,
    bf16Dense: bf16 ? 2 * bf16CopyParams(config, false) + packedBytes(config, false) : 0,
    slotWeights: bf16 ? F32 * Math.max(0, ...experts.map((x) => x.weights - x.linear)) : s.expert,
    expertBf16: bf16 ? 2 * Math.max(0, ...experts.map((x) => x.linear)) : 0,
  }
}

/** The frozen linear weights the CPU backend keeps packed for its bf16 GEMMs (native/engine/model/model.cpp
 * plan_bf16_copies): two layouts of 2 B each; the routed experts' only while they are resident. */
function packedBytes(config: RunConfig, experts: boolean): number {
  const keeps = (config.train.backend ?? 'cpu') === 'cpu' && config.train.pack_frozen_bf16 !== false
  return keeps ? 4 * frozenLinearParams(config, experts) : 0
}

function stateSizesOf(config: RunConfig): Omit<Sizes, 'bf16Copies' | 'bf16Dense' | 'slotWeights' | 'expertBf16'> {
  const { saved, scratch } = activationFloats(config)
  const common = { activations: saved * F32, buffers: scratch * F32 }
  if (config.finetune) {
    const { dense, experts } = stateFloats(config)
    const bytes = experts.map((x) => ({ w: x.weights * F32, t: x.trained * F32, split: x.split }))
    const largest = { weights: 0, grad: 0 }
    for (const x of bytes) {
      const p = recordParts(x.w, x.t, x.split)
      largest.weights = Math.max(largest.weights, p.weights)
      largest.grad = Math.max(largest.grad, p.grad)
    }
    return {
      dense: dense.weights * F32,
      denseTrained: dense.trained * F32,
      expert: Math.max(0, ...bytes.map((x) => x.w)),
      expertTrained: Math.max(0, ...bytes.map((x) => x.t)),
      allExperts: bytes.reduce((s, x) => s + x.w, 0),
      allExpertsTrained: bytes.reduce((s, x) => s + x.t, 0),
      experts: bytes.length,
      record: recordBytes(largest),
      ssdFile: bytes.reduce((s, x) => s + recordBytes(recordParts(x.w, x.t, x.split)), 0),
      sideTrained: bytes.reduce((s, x) => s + (x.split ? x.t : 0), 0),
      ...common,
    }
  }
  const counts = countParams(config.model)
  const perExpert = counts.padded.perExpert.flatMap((floats, l) => new Array<number>(counts.expertsPerLayer[l]!).fill(floats * F32))
  const expert = Math.max(0, ...perExpert)
  const record = 4 * aligned(expert)
  return {
    dense: counts.padded.dense * F32,
    denseTrained: counts.padded.dense * F32,
    expert,
    expertTrained: expert,
    allExperts: counts.padded.experts * F32,
    allExpertsTrained: counts.padded.experts * F32,
    experts: perExpert.length,
    record,
    ssdFile: perExpert.length * record,
    sideTrained: 0,
    ...common,
  }
}

function tier(name: TierBytes['tier'], parts: Omit<TierBytes, 'tier' | 'total' | 'budget'>, budget: number | null): TierBytes {
  const total = parts.params + parts.grads + parts.optimizer + parts.activations + parts.buffers
  return { tier: name, ...parts, total, budget }
}

export const emptyTier = (name: TierBytes['tier'], budget: number | null): TierBytes =>
  tier(name, { params: 0, grads: 0, optimizer: 0, activations: 0, buffers: 0 }, budget)

/** Everything on the device: every parameter's weights, the trained ones' gradient and moments, activations and buffers. */
export function residentDevice(s: Sizes, budget: number): TierBytes {
  const params = s.dense + s.allExperts + s.bf16Copies, trained = s.denseTrained + s.allExpertsTrained
  return tier('device', { params, grads: trained, optimizer: 2 * trained, activations: s.activations, buffers: s.buffers }, budget)
}

/** One expert slot: weights + gradient buffer (the trained part only) + its linear weights' bf16 copy under bf16
 * compute; a mapped slot (the expert computes on its host copy in place) holds no weights buffer. */
export const slotBytes = (s: Sizes, mapped = false) => (mapped ? 0 : s.slotWeights) + s.expertTrained + s.expertBf16

/** The dense state, activations and buffers, and `slots` expert slots. */
export function offloadedDevice(s: Sizes, slots: number, budget: number, mapped = false): TierBytes {
  return tier(
    'device',
    {
      params: s.dense + s.bf16Dense + slots * ((mapped ? 0 : s.slotWeights) + s.expertBf16), grads: s.denseTrained + slots * s.expertTrained,
      optimizer: 2 * s.denseTrained,
      activations: s.activations, buffers: s.buffers,
    },
    budget,
  )
}

/** What the device holds besides the slots. */
export const deviceFixed = (s: Sizes) => s.dense + s.bf16Dense + 3 * s.denseTrained + s.activations + s.buffers

/** Slots a device budget holds after its fixed part, at most one per expert (the engine's cap). */
export function slotsFor(s: Sizes, budget: number, mapped = false): number {
  const left = budget - deviceFixed(s), slot = slotBytes(s, mapped)
  if (slot === 0) return left >= 0 ? s.experts : 0  // mapped slots of frozen experts cost nothing
  return Math.min(s.experts, Math.max(0, Math.floor(left / slot)))
}

/** Host mode: every expert's weights and its trained part's gradient and moments; delayed updates also keep every
 * expert's pending gradient. */
export function hostTierOfHostMode(s: Sizes, delayed: boolean, budget: number, staging = 0): TierBytes {
  const t = s.allExpertsTrained
  return tier('host', { params: s.allExperts, grads: delayed ? 2 * t : t, optimizer: 2 * t, activations: 0, buffers: staging }, budget)
}

/** bf16 compute beside a device (not the cpu backend), copying into slots: one expert's bf16 weights, converted on
 * the host before their upload (the engine's bf16 upload staging); 0 otherwise. */
export const bf16Staging = (s: Sizes, backend: string, mapped: boolean) => (backend !== 'cpu' && !mapped ? s.expertBf16 : 0)

/** SSD mode: `entries` cache entries of one record each, and the adapters' state kept beside them. */
export function hostTierOfSsdMode(s: Sizes, entries: number, budget: number, staging = 0): TierBytes {
  const inFile = s.allExpertsTrained - s.sideTrained
  const ratio = s.allExperts + 3 * inFile
  const bytes = entries * s.record
  // Booked in proportion to what the records hold (full training: a quarter each to weights and gradient).
  const grads = ratio > 0 ? (bytes * inFile) / ratio : 0
  const side = s.sideTrained
  return tier('host', { params: bytes - 3 * grads + side, grads: grads + side, optimizer: 2 * (grads + side), activations: 0, buffers: staging }, budget)
}

/** SSD mode: the host bytes besides the cache entries (the adapters' weights, gradient and moments). */
export const sideBytes = (s: Sizes) => 4 * s.sideTrained

/** SSD mode: one record per expert; the parts' alignment padding is booked as buffers. */
export function ssdTier(s: Sizes, budget: number | null): TierBytes {
  const t = s.allExpertsTrained - s.sideTrained
  return tier('ssd', {
    params: s.allExperts, grads: t, optimizer: 2 * t, activations: 0, buffers: s.ssdFile - s.allExperts - 3 * t,
  }, budget)
}
