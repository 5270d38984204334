// What null means for each nullable config field, as its checkbox says it, and the value unticking the
// box starts from (a typical setting, so the field is valid at once).
import type { FormField } from './schema-fields'

export interface NullChoice {
  label: string
  placeholder: string
  start: number
}

const CHOICES: Record<string, NullChoice> = {
  'model.capacity_factor': { label: 'dropless (null)', placeholder: 'no capacity limit', start: 1 },
  'model.head_dim': { label: 'd_model ÷ n_heads (null)', placeholder: 'd_model ÷ n_heads', start: 64 },
  'model.clip_qkv': { label: 'no clipping (null)', placeholder: 'q, k, v not clipped', start: 8 },
  'offload.device_budget_bytes': { label: 'no budget (null)', placeholder: 'expert_slots decide', start: 2 ** 30 },
  'offload.expert_slots': { label: 'from the budget (null)', placeholder: 'as many as the budget holds', start: 4 },
  'offload.host_budget_bytes': { label: 'machine memory (null)', placeholder: 'the machine’s memory', start: 2 ** 32 },
  'offload.cache_experts': { label: 'from the host budget (null)', placeholder: 'as many as the host budget holds', start: 8 },
  'placement.device_budget_bytes': { label: 'unlimited (null)', placeholder: 'no budget per device', start: 2 ** 30 },
  'placement.threads_per_device': { label: 'split the run’s threads (null)', placeholder: 'run threads ÷ devices', start: 1 },
}

export const nullChoice = (field: Pick<FormField, 'path' | 'min' | 'exclusiveMin'>): NullChoice =>
  CHOICES[field.path] ?? { label: 'null', placeholder: '', start: field.min ?? (field.exclusiveMin ?? 0) + 1 }
