// The form's working copy of a run config: plain values per section, where an absent key means
// "use the schema's default" (or, for optional fields, "let the engine derive it").
import type { RunConfig } from '../../main/api/config'
import { moeLayerIndexes } from '../../main/api/model-families'
import { runConfigForm, type FormField, type FormSection, type SectionName } from './schema-fields'

export type ConfigDraft = Record<SectionName, Record<string, unknown>>

export function draftFromConfig(config: RunConfig | ConfigDraft): ConfigDraft {
  const { model, train, offload, routing_skew, placement, pipeline } = config
  return structuredClone({
    model: { ...model }, train: { ...train }, offload: { ...offload }, routing_skew: { ...routing_skew }, placement: { ...placement },
    pipeline: { ...pipeline },
  }) as ConfigDraft
}

/** Every default of the schema; an enum without one starts at its first option. */
export function defaultDraft(sections: FormSection[] = runConfigForm()): ConfigDraft {
  const draft: ConfigDraft = { model: {}, train: {}, offload: {}, routing_skew: {}, placement: {}, pipeline: {} }
  for (const field of sections.flatMap((s) => s.fields)) {
    if (field.defaultValue !== undefined) draft[field.section][field.key] = structuredClone(field.defaultValue)
    else if (field.kind === 'enum') draft[field.section][field.key] = field.options[0]
  }
  return draft
}

export function readField(draft: ConfigDraft, field: Pick<FormField, 'section' | 'key'>): unknown {
  return draft[field.section][field.key]
}

/** A copy of the draft with one field set; undefined unsets it. */
export function withField(draft: ConfigDraft, field: Pick<FormField, 'section' | 'key'>, value: unknown): ConfigDraft {
  const section = { ...draft[field.section] }
  if (value === undefined) delete section[field.key]
  else section[field.key] = value
  return { ...draft, [field.section]: section }
}

/** The value a field has in effect: its own, else the schema default. */
export function effectiveValue(draft: ConfigDraft, field: FormField): unknown {
  return readField(draft, field) ?? field.defaultValue
}

/** How many MoE layers the draft's shape has (the length a per-layer n_experts list needs). */
export function moeLayerCount(draft: ConfigDraft): number {
  const layers = Number(draft.model['n_layers'] ?? 4)
  const every = Number(draft.model['moe_every'] ?? 1)
  const dense = draft.model['dense_layers']
  if (!(every > 0) || !Number.isFinite(layers)) return 0
  return moeLayerIndexes({ n_layers: layers, moe_every: every, dense_layers: Array.isArray(dense) ? (dense as number[]) : [] }).length
}

/** "4, 8,16" -> [4, 8, 16]; null when any entry is not a number. */
export function parseNumberList(text: string): number[] | null {
  const parts = text.split(/[\s,]+/).filter((p) => p.length > 0)
  if (parts.length === 0) return null
  const values = parts.map(Number)
  return values.every(Number.isFinite) ? values : null
}

/** An input's text as a field value: empty is "unset"; text that is not a number stays as typed so validation can name it. */
export function numberFromInput(text: string): number | string | undefined {
  const trimmed = text.trim()
  if (trimmed === '') return undefined
  const value = Number(trimmed)
  return Number.isFinite(value) ? value : trimmed
}
