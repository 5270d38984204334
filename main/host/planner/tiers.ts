// Bytes per tier for each placement of expert state, as the engine books them
// (native/engine/offload/expert_offload.cpp and ssd_store.cpp). Every state is fp32: parameters,
// gradients and two AdamW moments, so a parameter costs 4 copies × 4 bytes wherever it lives.
import type { RunConfig } from '../../api/config'
import type { Plan } from '../../api/contract'
import { activationFloats } from './activations'
import { countParams } from './param-count'

export type TierBytes = Plan['tiers'][number]

const F32 = 4
/** Each part of an SSD record (weights, gradient, two moments) is 4096-aligned for direct I/O. */
export const SSD_ALIGN = 4096

export interface Sizes {
  /** One copy of the non-expert parameters (the arena minus every expert range). */
  dense: number
  /** One copy of the largest routed expert: a slot or a cache entry holds this much per state. */
  expert: number
  /** One copy of every routed expert. */
  allExperts: number
  /** Routed experts over all MoE layers. */
  experts: number
  /** One SSD record, which is also one host cache entry: 4 parts of the largest expert, each rounded up to SSD_ALIGN. */
  record: number
  activations: number
  buffers: number
}

export function sizesOf(config: RunConfig): Sizes {
  const counts = countParams(config.model)
  const { saved, scratch } = activationFloats(config)
  const perExpert = counts.padded.perExpert.flatMap((floats, l) => new Array<number>(counts.expertsPerLayer[l]!).fill(floats * F32))
  const expert = Math.max(0, ...perExpert)
  return {
    dense: counts.padded.dense * F32,
    expert,
    allExperts: counts.padded.experts * F32,
    experts: perExpert.length,
    record: 4 * Math.ceil(expert / SSD_ALIGN) * SSD_ALIGN,
    activations: saved * F32,
    buffers: scratch * F32,
  }
}

function tier(name: TierBytes['tier'], parts: Omit<TierBytes, 'tier' | 'total' | 'budget'>, budget: number | null): TierBytes {
  const total = parts.params + parts.grads + parts.optimizer + parts.activations + parts.buffers
  return { tier: name, ...parts, total, budget }
}

export const emptyTier = (name: TierBytes['tier'], budget: number | null): TierBytes =>
  tier(name, { params: 0, grads: 0, optimizer: 0, activations: 0, buffers: 0 }, budget)

/** Everything on the device: every parameter's four states, activations and buffers. */
export function residentDevice(s: Sizes, budget: number): TierBytes {
  const params = s.dense + s.allExperts
  return tier('device', { params, grads: params, optimizer: 2 * params, activations: s.activations, buffers: s.buffers }, budget)
}

/** The dense state, activations and buffers, and `slots` expert slots (weights + gradient buffer each). */
export function offloadedDevice(s: Sizes, slots: number, budget: number): TierBytes {
  const slotBytes = slots * s.expert
  return tier(
    'device',
    { params: s.dense + slotBytes, grads: s.dense + slotBytes, optimizer: 2 * s.dense, activations: s.activations, buffers: s.buffers },
    budget,
  )
}

/** What the device holds besides the slots. */
export const deviceFixed = (s: Sizes) => 4 * s.dense + s.activations + s.buffers

/** Slots a device budget holds after its fixed part, at most one per expert (the engine's cap). */
export function slotsFor(s: Sizes, budget: number): number {
  return Math.min(s.experts, Math.max(0, Math.floor((budget - deviceFixed(s)) / (2 * s.expert))))
}

/** Host mode: every expert's four states; delayed updates also keep every expert's pending gradient. */
export function hostTierOfHostMode(s: Sizes, delayed: boolean, budget: number): TierBytes {
  const a = s.allExperts
  return tier('host', { params: a, grads: delayed ? 2 * a : a, optimizer: 2 * a, activations: 0, buffers: 0 }, budget)
}

/** SSD mode: `entries` cache entries of one record each. */
export function hostTierOfSsdMode(s: Sizes, entries: number, budget: number): TierBytes {
  const part = (entries * s.record) / 4
  return tier('host', { params: part, grads: part, optimizer: 2 * part, activations: 0, buffers: 0 }, budget)
}

/** SSD mode: one record per expert; the parts' alignment padding is booked as buffers. */
export function ssdTier(s: Sizes, budget: number | null): TierBytes {
  const a = s.allExperts
  return tier('ssd', { params: a, grads: a, optimizer: 2 * a, activations: 0, buffers: s.experts * s.record - 4 * a }, budget)
}
