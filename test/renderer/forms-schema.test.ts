// The New-run form model is generated from the real RunConfigSchema: every field kind, defaults,
// optional fields, ranges and help text come from the schema.
import { describe, expect, it } from 'vitest'

import { OffloadConfigSchema, PipelineConfigSchema, PlacementConfigSchema, RoutingSkewConfigSchema, RunConfigSchema } from '../../main/api/config'
import { defaultDraft, moeLayerCount, numberFromInput, parseNumberList, withField } from '../../renderer/forms/config-draft'
import { allFields, nestedStart, rangeText, runConfigForm, sectionsFromJsonSchema, type FormField } from '../../renderer/forms/schema-fields'

const field = (path: string): FormField => {
  const found = allFields().find((f) => f.path === path)
  if (!found) throw new Error(`no field ${path}`)
  return found
}

describe('form model from the run config schema', () => {
  it('has a model, a training, an offload, a routing-skew, a placement and a pipeline section holding every schema field', () => {
    const sections = runConfigForm()
    expect(sections.map((s) => s.name)).toEqual(['model', 'train', 'offload', 'routing_skew', 'placement', 'pipeline'])
    expect(sections[0]!.fields.map((f) => f.key)).toEqual(Object.keys(RunConfigSchema.shape.model.shape))
    expect(sections[1]!.fields.map((f) => f.key)).toEqual(Object.keys(RunConfigSchema.shape.train.shape))
    expect(sections[2]!.fields.map((f) => f.key)).toEqual(Object.keys(OffloadConfigSchema.shape))
    expect(sections[3]!.fields.map((f) => f.key)).toEqual(Object.keys(RoutingSkewConfigSchema.shape))
    expect(sections[4]!.fields.map((f) => f.key)).toEqual(Object.keys(PlacementConfigSchema.shape))
    expect(sections[5]!.fields.map((f) => f.key)).toEqual(Object.keys(PipelineConfigSchema.shape))
  })

  it('gives each field its kind', () => {
    expect(field('model.arch')).toMatchObject({ kind: 'enum', options: ['gpt-moe', 'mixtral', 'gpt-oss'], optional: false })
    expect(field('model.top_k')).toMatchObject({ kind: 'integer', integer: true, min: 1, max: 64, defaultValue: 2 })
    expect(field('train.lr')).toMatchObject({ kind: 'number', integer: false, min: 0, max: 10, defaultValue: 3e-4 })
    expect(field('model.renormalize')).toMatchObject({ kind: 'boolean', defaultValue: true, optional: false })
    expect(field('model.capacity_factor')).toMatchObject({ kind: 'nullable-number', defaultValue: null, exclusiveMin: 0 })
    expect(field('model.n_experts')).toMatchObject({ kind: 'number-or-list', integer: true, min: 1, max: 65536, defaultValue: 8 })
  })

  it('marks fields without a default as optional, and carries descriptions as help text', () => {
    expect(field('model.n_kv_heads')).toMatchObject({ kind: 'integer', optional: true, defaultValue: undefined })
    expect(field('model.tie_embeddings')).toMatchObject({ kind: 'boolean', optional: true })
    expect(field('train.min_lr').optional).toBe(true)
    expect(field('model.top_k').description).toBe('Experts per token')
    expect(field('train.beta1').description).toBeNull()
  })

  it('states ranges the way the input enforces them', () => {
    expect(rangeText(field('model.top_k'))).toBe('1 … 64')
    expect(rangeText(field('model.capacity_factor'))).toBe('> 0')
  })

  it('refuses a schema shape it cannot render, naming the field', () => {
    const empty = { properties: {} }
    const schema = { properties: { model: { properties: { odd: { type: 'array', items: { type: 'string' } } } }, train: empty, offload: empty, routing_skew: empty, placement: empty, pipeline: empty } }
    expect(() => sectionsFromJsonSchema(schema)).toThrow(/model\.odd/)
  })

  it('gives a nested section (latent attention, rope scaling, router) its own generated fields', () => {
    const fields = allFields(runConfigForm())
    for (const path of ['model.latent_attention', 'model.rope_scaling', 'model.router'])
      expect(fields.find((f) => f.path === path), path).toMatchObject({ kind: 'object', optional: true })
    const router = field('model.router')
    expect(router.fields!.map((f) => [f.path, f.kind])).toEqual([
      ['model.router.scoring', 'enum'], ['model.router.selection', 'enum'],
      ['model.router.n_group', 'integer'], ['model.router.topk_group', 'integer'],
    ])
    expect(router.fields![1]).toMatchObject({ section: 'model', key: 'selection', options: ['plain', 'group_limited', 'noaux_tc'] })
    const rope = field('model.rope_scaling')
    expect(rope.fields!.find((f) => f.key === 'type')).toMatchObject({ kind: 'enum', options: ['yarn'], optional: false })
    expect(rope.fields!.find((f) => f.key === 'truncate')).toMatchObject({ kind: 'boolean', defaultValue: true })
    const latent = field('model.latent_attention')
    expect(latent.fields!.map((f) => f.key)).toEqual(Object.keys(RunConfigSchema.shape.model.shape.latent_attention.unwrap().shape))
    // Switched on, a section starts valid where the schema can say so: defaults, the first option, even rope widths.
    expect(nestedStart(router)).toEqual({ scoring: 'softmax', selection: 'plain', n_group: 1, topk_group: 1 })
    expect(nestedStart(rope)).toMatchObject({ type: 'yarn', factor: 1, beta_fast: 32, truncate: true })
    const start = nestedStart(latent)
    expect(start['qk_rope_head_dim']).toBe(2)
    const model = { ...RunConfigSchema.parse({ model: { arch: 'mixtral' }, train: {} }).model, latent_attention: start, n_kv_heads: 4 }
    expect(RunConfigSchema.safeParse({ model, train: {} }).success).toBe(true)
    expect(RunConfigSchema.safeParse({ model: { arch: 'mixtral', rope_scaling: nestedStart(rope) }, train: {} }).success).toBe(true)
  })
})

describe('config draft', () => {
  it('starts from the schema defaults, and those defaults are a valid config', () => {
    const draft = defaultDraft()
    expect(draft.model).toMatchObject({ arch: 'gpt-moe', top_k: 2, n_experts: 8, capacity_factor: null, renormalize: true })
    expect(draft.model).not.toHaveProperty('n_kv_heads')
    expect(RunConfigSchema.safeParse(draft).success).toBe(true)
  })

  it('sets and unsets one field without touching the rest', () => {
    const draft = defaultDraft()
    const next = withField(draft, field('model.top_k'), 1)
    expect(next.model['top_k']).toBe(1)
    expect(draft.model['top_k']).toBe(2)
    expect(withField(next, field('model.top_k'), undefined).model).not.toHaveProperty('top_k')
  })

  it('counts MoE layers for the per-layer n_experts list', () => {
    expect(moeLayerCount({ model: { n_layers: 4, moe_every: 2 }, train: {}, offload: {}, routing_skew: {}, placement: {}, pipeline: {} })).toBe(2)
    expect(moeLayerCount({ model: { n_layers: 3 }, train: {}, offload: {}, routing_skew: {}, placement: {}, pipeline: {} })).toBe(3)
  })

  it('parses typed numbers and lists', () => {
    expect(parseNumberList('4, 8,16')).toEqual([4, 8, 16])
    expect(parseNumberList('1, x')).toBeNull()
    expect(parseNumberList('  ')).toBeNull()
    expect(numberFromInput('')).toBeUndefined()
    expect(numberFromInput(' 2e-3 ')).toBe(0.002)
    expect(numberFromInput('abc')).toBe('abc')
  })
})
