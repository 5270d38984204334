// The fields of a section that matter for the draft's choices. Offload: the mode alone when resident, the
// SSD cache's knobs only where the SSD may be used (ssd, auto), the LFU knobs only with the LFU policy.
// Routing skew: the distribution alone when off, then the seed and the distribution's own parameter.
// Placement: the devices alone for one device, then the policy, LLEP's knobs only for least-loaded and
// greedy_split only for greedy; the devices' budget and threads wherever experts run on the devices (more than
// one, or a pipeline on one). Pipeline: the partitions and the memory reuse, the candidates only for "auto".
// Model: the fields a family's features make meaningful (key/value heads with grouped-query attention, the RoPE
// base with RoPE, the qkv bias where the family does not fix it). Train: the load-balancing rate only with a
// selection bias to move, the GEMM library only on the cuda backend.
// A field with an issue always shows, so no issue is hidden behind a choice.
import { FAMILY_NAMES, modelFamily } from '../../main/api/model-families'
import type { ConfigDraft } from './config-draft'
import type { FormField, FormSection, SectionName } from './schema-fields'

const SSD_KEYS = new Set(['cache_policy', 'cache_experts', 'prefetch', 'lfu_threshold', 'lfu_decay', 'lfu_decay_every'])
const LFU_KEYS = new Set(['lfu_threshold', 'lfu_decay', 'lfu_decay_every'])

function offloadUses(key: string, offload: Record<string, unknown>): boolean {
  const mode = offload['mode'] ?? 'none'
  if (key === 'mode') return true
  if (mode === 'none') return false
  if (SSD_KEYS.has(key) && mode !== 'ssd' && mode !== 'auto') return false
  return !LFU_KEYS.has(key) || offload['cache_policy'] === 'lfu'
}

const SKEW_PARAMETER: Record<string, string> = { zipf_s: 'zipf', hot_fraction: 'hot' }

function skewUses(key: string, skew: Record<string, unknown>): boolean {
  const distribution = skew['distribution'] ?? 'none'
  if (key === 'distribution') return true
  if (distribution === 'none') return false
  const needs = SKEW_PARAMETER[key]
  return needs === undefined || needs === distribution
}

const LEAST_LOADED_KEYS = new Set(['lambda', 'alpha', 'min_tokens'])
const DEVICE_KEYS = new Set(['device_budget_bytes', 'threads_per_device'])

/** The draft's pipeline is engaged (as the schema's pipelineEngaged): more than one partition, auto, or memory reuse. */
export function draftPipelined(draft: ConfigDraft): boolean {
  return (draft.pipeline['partitions'] ?? 1) !== 1 || (draft.pipeline['memory_reuse'] ?? 'off') !== 'off'
}

const manyDevices = (draft: ConfigDraft) => Number(draft.placement['devices'] ?? 1) > 1

function placementUses(key: string, placement: Record<string, unknown>, draft: ConfigDraft): boolean {
  if (key === 'devices') return true
  if (DEVICE_KEYS.has(key)) return manyDevices(draft) || draftPipelined(draft)
  if (!manyDevices(draft)) return false
  if (LEAST_LOADED_KEYS.has(key)) return placement['policy'] === 'least-loaded'
  if (key === 'greedy_split') return placement['policy'] === 'greedy'
  return true
}

function pipelineUses(key: string, pipeline: Record<string, unknown>): boolean {
  return key !== 'candidates' || pipeline['partitions'] === 'auto'
}

function modelUses(key: string, model: Record<string, unknown>): boolean {
  const arch = model['arch']
  if (typeof arch !== 'string' || !(FAMILY_NAMES as readonly string[]).includes(arch)) return true
  const f = modelFamily(arch).features
  if (key === 'n_kv_heads') return f.attention !== 'mha'
  if (key === 'rope_theta') return f.position === 'rope'
  if (key === 'qkv_bias') return !f.linear_bias
  if (key === 'out_bias') return !f.linear_bias && !f.out_bias
  return true
}

function trainUses(key: string, train: Record<string, unknown>, draft: ConfigDraft): boolean {
  if (key === 'gemm') return train['backend'] === 'cuda'
  return key !== 'balance_bias_rate' || draft.model['selection_bias'] === true
}

const USES: Partial<Record<SectionName, (key: string, values: Record<string, unknown>, draft: ConfigDraft) => boolean>> = {
  model: modelUses,
  train: trainUses,
  offload: offloadUses,
  routing_skew: skewUses,
  placement: placementUses,
  pipeline: pipelineUses,
}

export function shownFields(section: FormSection, draft: ConfigDraft, hasIssues: (path: string) => boolean): FormField[] {
  const uses = USES[section.name]
  if (!uses) return section.fields
  const shown = section.fields.filter((f) => uses(f.key, draft[section.name], draft) || hasIssues(f.path))
  return shown.length === section.fields.length ? section.fields : shown
}

/** Whether the section's choice is "off" (its note then says what that means): resident, routed, one device, not pipelined. */
export function sectionOff(name: SectionName, draft: ConfigDraft): boolean {
  if (name === 'offload') return (draft.offload['mode'] ?? 'none') === 'none'
  if (name === 'routing_skew') return (draft.routing_skew['distribution'] ?? 'none') === 'none'
  if (name === 'placement') return !manyDevices(draft) && !draftPipelined(draft)
  if (name === 'pipeline') return !draftPipelined(draft)
  return false
}
