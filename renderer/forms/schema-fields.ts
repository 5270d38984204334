// The New-run form's field model, generated from the JSON Schema of the run config (zod 4's
// z.toJSONSchema of the same RunConfigSchema the host validates with), so every field, range,
// default and help text has one source. A schema shape the form cannot render throws, naming the
// field, so a schema change shows up in the tests rather than as a silently missing input.
import { z } from 'zod'

import { RunConfigSchema } from '../../main/api/config'

export type FieldKind =
  | 'integer' | 'number' | 'boolean' | 'enum' | 'nullable-number' | 'number-or-list'
  /** A whole number in a range, or one word standing for "the engine chooses" (options[0], e.g. "auto"). */
  | 'integer-or-word'
  /** A non-empty list of numbers in a range, typed as "1, 2, 4, 8". */
  | 'number-list'
  /** A nested section (model.latent_attention, model.rope_scaling, model.router): its own fields, set as a whole or unset. */
  | 'object'
export type SectionName = 'model' | 'train' | 'offload' | 'routing_skew' | 'placement' | 'pipeline'

export interface FormField {
  section: SectionName
  key: string
  /** Dotted path in the config, as validation issues name it: "model.top_k". */
  path: string
  kind: FieldKind
  description: string | null
  /** May be left unset: the engine then derives it (e.g. n_kv_heads from n_heads). */
  optional: boolean
  /** The schema's default, used when the input is left empty; undefined when there is none. */
  defaultValue: unknown
  /** Whether numbers (or list items) must be whole. */
  integer: boolean
  min: number | null
  max: number | null
  /** A lower bound the value must exceed (capacity_factor > 0). */
  exclusiveMin: number | null
  options: string[]
  /** 'bytes' for byte counts (the *_bytes fields), entered and shown in binary units. */
  unit: 'bytes' | null
  /** kind 'object': the nested section's fields (paths "model.router.n_group"; section and key name the parent). */
  fields?: FormField[]
}

export interface FormSection {
  name: SectionName
  title: string
  fields: FormField[]
}

interface JsonSchemaNode {
  type?: string | string[]
  enum?: unknown[]
  anyOf?: JsonSchemaNode[]
  items?: JsonSchemaNode
  const?: unknown
  minItems?: number
  properties?: Record<string, JsonSchemaNode>
  required?: string[]
  default?: unknown
  description?: string
  minimum?: number
  maximum?: number
  exclusiveMinimum?: number
}

const SECTION_TITLES: Record<SectionName, string> = {
  model: 'Model',
  train: 'Training',
  offload: 'Offload',
  routing_skew: 'Routing skew (experiment)',
  placement: 'Placement (devices)',
  pipeline: 'Pipeline (micro-batches)',
}

function bounds(node: JsonSchemaNode): Pick<FormField, 'integer' | 'min' | 'max' | 'exclusiveMin'> {
  return {
    integer: node.type === 'integer',
    min: node.minimum ?? null,
    max: node.maximum ?? null,
    exclusiveMin: node.exclusiveMinimum ?? null,
  }
}

const isNumeric = (node: JsonSchemaNode | undefined) => node?.type === 'integer' || node?.type === 'number'

function fieldShape(path: string, node: JsonSchemaNode): Pick<FormField, 'kind' | 'integer' | 'min' | 'max' | 'exclusiveMin' | 'options'> {
  const plain = { options: [] as string[] }
  if (node.type === 'boolean') return { kind: 'boolean', ...bounds(node), ...plain }
  if (node.type === 'string' && Array.isArray(node.enum)) return { kind: 'enum', ...bounds(node), options: node.enum.map(String) }
  if (node.type === 'string' && typeof node.const === 'string') return { kind: 'enum', ...bounds(node), options: [node.const] }
  if (node.type === 'integer') return { kind: 'integer', ...bounds(node), ...plain }
  if (node.type === 'number') return { kind: 'number', ...bounds(node), ...plain }
  if (node.anyOf?.length === 2) {
    const [first, second] = node.anyOf
    if (isNumeric(first) && second?.type === 'null') return { kind: 'nullable-number', ...bounds(first!), ...plain }
    if (isNumeric(first) && second?.type === 'array' && isNumeric(second.items))
      return { kind: 'number-or-list', ...bounds(first!), ...plain }
    if (first?.type === 'integer' && second?.type === 'string' && typeof second.const === 'string')
      return { kind: 'integer-or-word', ...bounds(first), options: [second.const] }
  }
  if (node.type === 'array' && isNumeric(node.items)) return { kind: 'number-list', ...bounds(node.items!), ...plain }
  if (node.type === 'object') return { kind: 'object', ...bounds(node), ...plain }
  throw new Error(`the New-run form cannot render config field "${path}" (JSON Schema ${JSON.stringify(node)})`)
}

function fieldOf(section: SectionName, key: string, path: string, node: JsonSchemaNode, required: Set<string>): FormField {
  const field: FormField = {
    section,
    key,
    path,
    ...fieldShape(path, node),
    description: node.description ?? null,
    optional: !required.has(key) && node.default === undefined,
    defaultValue: node.default,
    unit: key.endsWith('_bytes') ? 'bytes' : null,
  }
  if (field.kind === 'object') {
    const inner = new Set(node.required ?? [])
    field.fields = Object.entries(node.properties ?? {}).map(([k, n]) => fieldOf(section, k, `${path}.${k}`, n, inner))
  }
  return field
}

export function sectionsFromJsonSchema(schema: JsonSchemaNode): FormSection[] {
  return (Object.keys(SECTION_TITLES) as SectionName[]).map((name) => {
    const section = schema.properties?.[name]
    if (!section?.properties) throw new Error(`the run config schema has no "${name}" section`)
    const required = new Set(section.required ?? [])
    const fields = Object.entries(section.properties).map(([key, node]) => fieldOf(name, key, `${name}.${key}`, node, required))
    return { name, title: SECTION_TITLES[name], fields }
  })
}

/** Where a nested section starts when it is switched on: each field's default, the first option, or its minimum. */
export function nestedStart(field: FormField): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (const f of field.fields ?? []) {
    if (f.defaultValue !== undefined) out[f.key] = structuredClone(f.defaultValue)
    else if (f.kind === 'enum') out[f.key] = f.options[0]
    else if (!f.optional && (f.kind === 'integer' || f.kind === 'number')) out[f.key] = Math.max(f.min ?? 1, f.integer ? 2 : 1)
  }
  return out
}

let runConfigSections: FormSection[] | undefined

/** The sections of the run config form, generated once from RunConfigSchema. */
export function runConfigForm(): FormSection[] {
  runConfigSections ??= sectionsFromJsonSchema(z.toJSONSchema(RunConfigSchema, { io: 'input' }) as JsonSchemaNode)
  return runConfigSections
}

export function allFields(sections: FormSection[] = runConfigForm()): FormField[] {
  return sections.flatMap((s) => s.fields)
}

/** "1 … 64", "≥ 0", "> 0": the range shown under an input (the largest safe integer is no real bound). */
export function rangeText(field: FormField): string | null {
  const max = field.max !== null && field.max < Number.MAX_SAFE_INTEGER ? field.max : null
  const lower = field.exclusiveMin !== null ? `> ${field.exclusiveMin}` : field.min !== null ? `≥ ${field.min}` : null
  if (field.min !== null && max !== null) return `${field.min} … ${max}`
  if (lower && max !== null) return `${lower}, ≤ ${max}`
  return lower ?? (max !== null ? `≤ ${max}` : null)
}
