// The planner's arithmetic as the UI shows it: each tier's formula with this config's numbers, so a
// verdict can be checked by hand. Model state is 4 × the parameters (weights, gradients, two AdamW
// moments: MPipeMoE eq. 1); activations and buffers are MPipeMoE eqs. 2–3 summed over every layer; the
// tier split follows MoESys eq. 1 (all fp32 here, and the SSD also keeps gradients).
import type { ModelConfig, OffloadConfig } from '../../api/config'
import type { Plan } from '../../api/contract'
import { modelFeatures } from '../../api/model-families'
import { SSD_ALIGN, deviceFixed, type Sizes } from './tiers'

export function binaryBytes(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB']
  let value = bytes
  let unit = 0
  while (Math.abs(value) >= 1024 && unit < units.length - 1) {
    value /= 1024
    unit++
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(2)} ${units[unit]}`
}

export const exactBytes = (bytes: number) => `${bytes.toLocaleString('en-US')} bytes`

const n = (value: number) => value.toLocaleString('en-US')

export interface FormulaInput {
  model: ModelConfig
  offload: OffloadConfig
  sizes: Sizes
  mode: Plan['mode']
  slots: number | null
  mapped: boolean
  cacheExperts: number | null
  minCache: number
  tiers: Plan['tiers']
}

export function planFormulas({ model, offload, sizes: s, mode, slots, mapped, cacheExperts, minCache, tiers }: FormulaInput): string[] {
  const total = (name: string) => binaryBytes(tiers.find((t) => t.tier === name)?.total ?? 0)
  const tensors = modelFeatures(model).linear_bias ? 'w_in + b_in + w_out + b_out' : 'w_in + w_out'
  const lines = [
    '4 × = weights, gradients and two AdamW moments, all fp32 (MPipeMoE eq. 1: model state = 4 × parameters)',
    `e = 4 B × (${tensors}), each tensor padded to 16 floats = ${n(s.expert)} B (the largest routed expert)`,
    `all experts = Σ e over ${n(s.experts)} routed experts = ${binaryBytes(s.allExperts)}; D = 4 B × all parameters − all experts = ${binaryBytes(s.dense)}`,
  ]
  if (s.denseTrained !== s.dense || s.expertTrained !== s.expert)
    lines.push(`finetune: a frozen tensor keeps its weights only (no gradient, no moments), offloaded or not: D trains ${binaryBytes(s.denseTrained)}, ` +
      `all experts train ${binaryBytes(s.allExpertsTrained)}; a slot = e + the largest expert's trained part (${n(s.expertTrained)} B); ` +
      'a record = weights + 3 × trained part, each part 4 KiB aligned; an expert that also has frozen tensors (LoRA adapters on a frozen ' +
      'base) keeps its trained part’s weights, gradient and moments in host memory beside the cache, its record is its weights')
  const act = `activations ${binaryBytes(s.activations)} + buffers ${binaryBytes(s.buffers)}`
  if (mode === 'none') {
    if (s.bf16Copies > 0) {
      lines.push(`bf16 compute: a bf16 copy of every parameter (2 B each) and, on the cpu backend, each frozen linear weight packed for the bf16 GEMMs (2 × 2 B each) = ${binaryBytes(s.bf16Copies)}`)
      lines.push(`device = 4 × (D + all experts) + bf16 copies + activations + buffers = ${total('device')} (${act}; MPipeMoE eqs. 1–3)`)
    } else lines.push(`device = 4 × (D + all experts) + activations + buffers = ${total('device')} (${act}; MPipeMoE eqs. 1–3)`)
    return lines
  }
  // bf16 compute: B = the non-expert linear weights' bf16 copies; a slot keeps its expert's two linear weights (l)
  // only as their bf16 copy (l/2).
  const bf16 = s.expertBf16 > 0
  if (bf16)
    lines.push(`bf16 compute: B = a bf16 copy of each non-expert linear weight (2 B each) and, on the cpu backend, each frozen one packed for the bf16 GEMMs (2 × 2 B each) = ${binaryBytes(s.bf16Dense)}; ` +
      `l = 4 B × (w_in + w_out) of the largest expert = ${n(2 * s.expertBf16)} B, which a slot keeps only as their bf16 copy (l/2, converted where it computes), its fp32 weights buffer the rest of the expert (e − l)`)
  const fixed = bf16 ? '4·D + B' : '4·D', fixedBytes = binaryBytes(4 * s.dense + s.bf16Dense)
  const perSlot = mapped ? (bf16 ? 'slots·(e + l/2)' : 'slots·e') : bf16 ? 'slots·(2·e − l/2)' : '2·slots·e'
  const shown = perSlot.replace('slots', String(slots))
  const slot = mapped ? (bf16 ? '(e + l/2)' : 'e') : bf16 ? '(2·e − l/2)' : '(2·e)'
  const what = mapped
    ? `a mapped slot: the gradient alone${bf16 ? ' and the bf16 copy' : ''}; the expert computes on its host copy in place`
    : `a slot: weights${bf16 ? ' less the linear ones' : ''} + gradient${bf16 ? ' + their bf16 copy' : ''}; MPipeMoE eqs. 1–3`
  lines.push(`device = ${fixed} + ${perSlot} + activations + buffers = ${fixedBytes} + ${shown} + ${act} = ${total('device')} (${what})`)
  if (offload.expert_slots === null)
    lines.push(`slots = min(experts, ⌊(device budget − ${fixed} − activations − buffers) / ${slot}⌋) = ${slots} (needs ${binaryBytes(deviceFixed(s))} before the first slot)`)
  if (mode === 'host') {
    const delayed = offload.optimizer === 'delayed' ? ' + all experts of pending gradients (delayed updates)' : ''
    lines.push(`host = 4 × all experts${delayed} = ${total('host')} (every expert's weights, gradient and moments; MoESys eq. 1 CPU tier with α = 1)`)
    return lines
  }
  const record = `record = 4 × ⌈e / ${SSD_ALIGN}⌉ × ${SSD_ALIGN} = ${n(s.record)} B`
  const side = s.sideTrained > 0 ? ` + 4 × adapters’ trained part ${binaryBytes(s.sideTrained)}` : ''
  lines.push(`host = cache entries × record${side ? ' + 4 × adapters' : ''} = ${cacheExperts} × ${binaryBytes(s.record)}${side} = ${total('host')} (${record}: weights, gradient, 2 moments)`)
  if (offload.cache_experts === null)
    lines.push(`cache entries = min(experts, ⌊(host budget${side ? ' − 4 × adapters' : ''}) / record⌋) = ${cacheExperts}, at least max(lookahead + 2, 4) = ${minCache}`)
  lines.push(`ssd = experts × record = ${n(s.experts)} × ${binaryBytes(s.record)} = ${total('ssd')} (MoESys eq. 1 SSD tier, plus gradients)`)
  return lines
}
