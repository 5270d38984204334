// The fields of a section that matter for the draft's choices. Offload: the mode alone when resident, the
// SSD cache's knobs only where the SSD may be used (ssd, auto), the LFU knobs only with the LFU policy.
// Routing skew: the distribution alone when off, then the seed and the distribution's own parameter.
// Placement: the devices alone for one device, then the policy, and LLEP's knobs only for least-loaded.
// A field with an issue always shows, so no issue is hidden behind a choice.
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

function placementUses(key: string, placement: Record<string, unknown>): boolean {
  if (key === 'devices') return true
  if (!(Number(placement['devices'] ?? 1) > 1)) return false
  return !LEAST_LOADED_KEYS.has(key) || placement['policy'] === 'least-loaded'
}

const USES: Partial<Record<SectionName, (key: string, values: Record<string, unknown>) => boolean>> = {
  offload: offloadUses,
  routing_skew: skewUses,
  placement: placementUses,
}

export function shownFields(section: FormSection, draft: ConfigDraft, hasIssues: (path: string) => boolean): FormField[] {
  const uses = USES[section.name]
  if (!uses) return section.fields
  return section.fields.filter((f) => uses(f.key, draft[section.name]) || hasIssues(f.path))
}
