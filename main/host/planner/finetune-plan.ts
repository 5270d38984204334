// The memory verdict of a fine-tuning method: which parameters train (base tensors of the trained groups, and
// LoRA adapters), what their state costs, and where the frozen rest lives per tier. A trained parameter keeps an
// fp32 master, an fp32 gradient and two fp32 AdamW moments (16 bytes); a frozen one has no gradient and no moments
// and is stored fp32, or bf16 (2 bytes) when the planner is told the frozen base is kept bf16 (allowed only when
// train.compute_dtype is bf16). Routed experts, their adapters included, live where the offload mode puts expert
// state (host or SSD); everything else on the device. Activations and buffers are the plan's own.
import type { RunConfig } from '../../api/config'
import { resolveFinetune, touchedExperts, type ResolvedFinetune } from '../../api/finetune'
import { modelFeatures } from '../../api/model-families'
import { adaptedLinears, layoutTensors, type LayoutTensor } from './layout-tensors'

export type Tier = 'device' | 'host' | 'ssd'

export interface FinetuneCounts {
  /** Base parameters that train. */
  trainableBase: number
  /** LoRA adapter parameters (all train). */
  adapters: number
  /** trainableBase + adapters. */
  trainable: number
  /** Base parameters that do not train. */
  frozen: number
  /** Base parameters of the model (without adapters). */
  base: number
}

export interface FinetuneTierBytes {
  tier: Tier
  trainable: number // fp32 masters of what trains
  grads: number
  optimizer: number // two AdamW moments
  frozen: number
  total: number
}

export interface FinetuneVerdict {
  method: ResolvedFinetune['method'] | 'none'
  counts: FinetuneCounts
  frozenDtype: 'fp32' | 'bf16'
  tiers: FinetuneTierBytes[]
  /** Parameter-state bytes of training every parameter (the same tiers), for comparison. */
  fullStateBytes: number
  /** This method's parameter-state bytes over every tier. */
  stateBytes: number
}

/** Whether a base tensor trains under the resolved section (null section: every tensor but selection_bias). */
export function tensorTrains(t: LayoutTensor, f: ResolvedFinetune | null, experts: (layer: number) => number): boolean {
  if (t.group === null) return false
  if (!f) return true
  if (!f.train.includes(t.group)) return false
  if (t.group === 'lm_head' || t.group === 'embeddings') return true
  return t.expert === null || touchedExperts(f, t.layer!, experts(t.layer!)).includes(t.expert)
}

/** LoRA parameters of a tensor: r·(in + out) per adapted linear, for targeted modules (touched experts only). */
export function adapterParams(t: LayoutTensor, f: ResolvedFinetune | null, m: RunConfig['model'], experts: (layer: number) => number): number {
  if (!f?.lora || !t.linear || !f.lora.targets.includes(t.linear.target)) return 0
  if (t.expert !== null && !touchedExperts(f, t.layer!, experts(t.layer!)).includes(t.expert)) return 0
  return adaptedLinears(t, m).reduce((sum, x) => sum + f.lora!.rank * (x.in + x.out), 0)
}

function expertsAt(m: RunConfig['model']): (layer: number) => number {
  const tensors = new Map<number, Set<number>>()
  return (layer) => {
    if (!tensors.has(layer)) {
      const ids = new Set<number>()
      for (const t of layoutTensors(m)) if (t.layer === layer && t.expert !== null) ids.add(t.expert)
      tensors.set(layer, ids)
    }
    return tensors.get(layer)!.size
  }
}

export function finetuneCounts(config: RunConfig): FinetuneCounts {
  const f = resolveFinetune(config.finetune)
  const at = expertsAt(config.model)
  let trainableBase = 0, adapters = 0, base = 0
  for (const t of layoutTensors(config.model)) {
    base += t.numel
    if (tensorTrains(t, f, at)) trainableBase += t.numel
    adapters += adapterParams(t, f, config.model, at)
  }
  return { trainableBase, adapters, trainable: trainableBase + adapters, frozen: base - trainableBase, base }
}

const pad16 = (n: number) => Math.ceil(n / 16) * 16

/**
 * What the engine allocates for the method's parameter state (its describe's trainable_state_bytes and
 * frozen_bytes): a gradient and two AdamW moments (fp32) per trained float, each trained tensor (an adapter's A
 * and B each) padded to 16 floats as the engine's packed gradient arena pads them; the frozen base in fp32.
 */
export function finetuneStateBytes(config: RunConfig): { trainedState: number; frozen: number } {
  const f = resolveFinetune(config.finetune)
  const at = expertsAt(config.model)
  let trained = 0, frozen = 0
  for (const t of layoutTensors(config.model)) {
    if (tensorTrains(t, f, at)) trained += pad16(t.numel)
    else frozen += t.numel
    if (adapterParams(t, f, config.model, at) > 0)
      for (const x of adaptedLinears(t, config.model)) trained += pad16(f!.lora!.rank * x.in) + pad16(x.out * f!.lora!.rank)
  }
  return { trainedState: 12 * trained, frozen: 4 * frozen }
}

/**
 * Parameters of the frozen linear weights (those with bf16 copies under train.compute_dtype bf16: every linear
 * LoRA could adapt, and the output head: lm_head, or wte when tied to it), which the CPU backend keeps packed for its bf16 GEMMs
 * (native/engine/backend/cpu/packed_weights.h). Without a finetune section nothing is frozen.
 */
export function frozenLinearParams(config: RunConfig, experts = true): number {
  return linearParams(config, { experts, frozenOnly: true, padded: false })
}

/**
 * Parameters of the tensors with bf16 copies (as frozenLinearParams picks them), each padded to 16 as the engine's
 * copies are: a routed expert's included or not (an offloaded expert's copy lives in its slot, not beside the arena).
 */
export function bf16CopyParams(config: RunConfig, experts: boolean): number {
  return linearParams(config, { experts, frozenOnly: false, padded: true })
}

function linearParams(config: RunConfig, o: { experts: boolean; frozenOnly: boolean; padded: boolean }): number {
  const f = resolveFinetune(config.finetune)
  const at = expertsAt(config.model)
  const tied = modelFeatures(config.model).tie_embeddings
  let n = 0
  for (const t of layoutTensors(config.model)) {
    if (t.linear === null && t.name !== 'lm_head.weight' && !(tied && t.name === 'wte')) continue
    if ((!o.experts && t.expert !== null) || (o.frozenOnly && tensorTrains(t, f, at))) continue
    n += o.padded ? pad16(t.numel) : t.numel
  }
  return n
}

/** One routed expert's floats as the engine lays them out under a section: weights (its adapters included) and
 * trained (its gradient and each moment); split: trained and frozen tensors both (the SSD keeps the trained apart). */
export interface ExpertFloats {
  weights: number
  trained: number
  split: boolean
  /** Its two linear weights (padded): what a slot keeps only as their bf16 copy under bf16 compute. */
  linear: number
}

/**
 * The floats of the engine's arenas under the section, each tensor (an adapter's A and B each) padded to 16: the
 * non-expert weights and trained floats, and per routed expert (the expert offload's homes and slots).
 */
export function stateFloats(config: RunConfig): { dense: { weights: number; trained: number }; experts: ExpertFloats[] } {
  const f = resolveFinetune(config.finetune)
  const at = expertsAt(config.model)
  const dense = { weights: 0, trained: 0 }
  const experts = new Map<string, ExpertFloats>()
  for (const t of layoutTensors(config.model)) {
    const trains = tensorTrains(t, f, at)
    let adapters = 0
    if (adapterParams(t, f, config.model, at) > 0)
      for (const x of adaptedLinears(t, config.model)) adapters += pad16(f!.lora!.rank * x.in) + pad16(x.out * f!.lora!.rank)
    const weights = pad16(t.numel) + adapters, trained = (trains ? pad16(t.numel) : 0) + adapters
    if (t.expert === null) {
      dense.weights += weights
      dense.trained += trained
      continue
    }
    const key = `${t.layer}:${t.expert}`
    const x = experts.get(key) ?? { weights: 0, trained: 0, split: false, linear: 0 }
    x.split ||= !trains  // a frozen base tensor; split only once something trains too (below)
    x.weights += weights
    x.trained += trained
    if (t.linear !== null) x.linear += pad16(t.numel)
    experts.set(key, x)
  }
  return { dense, experts: [...experts.values()].map((x) => ({ ...x, split: x.split && x.trained > 0 })) }
}

export interface FinetunePlanOptions {
  /** Where routed experts' state lives (the plan's offload mode). */
  mode: 'none' | 'host' | 'ssd'
  /** Keep the frozen base in bf16; honoured only when train.compute_dtype is bf16. */
  frozenBf16?: boolean
}

export function finetuneVerdict(config: RunConfig, options: FinetunePlanOptions): FinetuneVerdict {
  const f = resolveFinetune(config.finetune)
  const at = expertsAt(config.model)
  const bf16 = options.frozenBf16 === true && config.train.compute_dtype === 'bf16'
  const frozenBytes = bf16 ? 2 : 4
  const expertTier: Tier = options.mode === 'none' ? 'device' : options.mode
  const tiers = new Map<Tier, FinetuneTierBytes>(
    (['device', 'host', 'ssd'] as const).map((tier) => [tier, { tier, trainable: 0, grads: 0, optimizer: 0, frozen: 0, total: 0 }]))
  let full = 0
  for (const t of layoutTensors(config.model)) {
    const tier = tiers.get(t.expert !== null ? expertTier : 'device')!
    const trains = tensorTrains(t, f, at)
    const trained = (trains ? t.numel : 0) + adapterParams(t, f, config.model, at)
    tier.trainable += 4 * trained
    tier.grads += 4 * trained
    tier.optimizer += 8 * trained
    if (!trains) tier.frozen += frozenBytes * t.numel
    full += 16 * t.numel
  }
  const list = [...tiers.values()].map((t) => ({ ...t, total: t.trainable + t.grads + t.optimizer + t.frozen }))
  return {
    method: f?.method ?? 'none',
    counts: finetuneCounts(config),
    frozenDtype: bf16 ? 'bf16' : 'fp32',
    tiers: list,
    fullStateBytes: full,
    stateBytes: list.reduce((s, t) => s + t.total, 0),
  }
}
