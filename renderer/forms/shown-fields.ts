// The offload fields that matter for the draft's mode: the mode alone when resident, the SSD cache's
// knobs only where the SSD may be used (ssd, auto), the LFU knobs only with the LFU policy. A field with
// an issue always shows, so no issue is hidden behind a mode.
import type { ConfigDraft } from './config-draft'
import type { FormField, FormSection } from './schema-fields'

const SSD_KEYS = new Set(['cache_policy', 'cache_experts', 'prefetch', 'lfu_threshold', 'lfu_decay', 'lfu_decay_every'])
const LFU_KEYS = new Set(['lfu_threshold', 'lfu_decay', 'lfu_decay_every'])

function relevant(key: string, offload: Record<string, unknown>): boolean {
  const mode = offload['mode'] ?? 'none'
  if (key === 'mode') return true
  if (mode === 'none') return false
  if (SSD_KEYS.has(key) && mode !== 'ssd' && mode !== 'auto') return false
  return !LFU_KEYS.has(key) || offload['cache_policy'] === 'lfu'
}

export function shownFields(section: FormSection, draft: ConfigDraft, hasIssues: (path: string) => boolean): FormField[] {
  if (section.name !== 'offload') return section.fields
  return section.fields.filter((f) => relevant(f.key, draft.offload) || hasIssues(f.path))
}
