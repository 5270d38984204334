// The New-run form's pipeline section: generated from the schema (partitions a whole number or "auto", the
// candidates a list), the candidates shown only for "auto", the note only when nothing is pipelined, and
// the schema's messages placed on the field they name.
import { describe, expect, it } from 'vitest'

import { defaultDraft, draftFromConfig, withField } from '../../renderer/forms/config-draft'
import { rangeText, runConfigForm } from '../../renderer/forms/schema-fields'
import { draftPipelined, sectionOff } from '../../renderer/forms/shown-fields'
import { checkDraft } from '../../renderer/forms/validation'
import { tinyConfig } from './compare-fixtures'
import { type Draft, field, fieldSetter, formSection, shownKeys } from './form-fixtures'

const section = () => formSection('pipeline')
const withPipeline = fieldSetter('pipeline')
const keys = (draft: Draft, issues?: string[]) => shownKeys('pipeline', draft, issues)
const DEFAULTS = { partitions: 1, candidates: [1, 2, 4, 8], memory_reuse: 'off' }

describe('pipeline fields', () => {
  it('come from the schema under their own title, after placement, with kinds, defaults, ranges and help', () => {
    const names = runConfigForm().map((s) => s.name)
    expect(names.indexOf('pipeline')).toBe(names.indexOf('placement') + 1)
    expect(section().title).toBe('Pipeline (micro-batches)')
    expect(field('pipeline.partitions')).toMatchObject({ kind: 'integer-or-word', integer: true, min: 1, max: 64, options: ['auto'], defaultValue: 1 })
    expect(field('pipeline.candidates')).toMatchObject({ kind: 'number-list', integer: true, min: 1, max: 64, defaultValue: [1, 2, 4, 8] })
    expect(field('pipeline.memory_reuse')).toMatchObject({ kind: 'enum', options: ['off', 'auto', 'S1', 'S2', 'S3', 'S4'], defaultValue: 'off' })
    expect(rangeText(field('pipeline.partitions'))).toBe('1 … 64')
    expect(section().fields.every((f) => f.description)).toBe(true)
  })

  it('default to one partition without reuse, and a default draft is a valid config that pipelines nothing', () => {
    const draft = defaultDraft()
    expect(draft.pipeline).toEqual(DEFAULTS)
    expect(checkDraft(draft).config?.pipeline).toEqual(DEFAULTS)
    expect(checkDraft(draftFromConfig(tinyConfig)).config?.pipeline).toEqual(DEFAULTS)
    expect(draftPipelined(draft)).toBe(false)
    expect(sectionOff('pipeline', draft)).toBe(true)
  })

  it('show the candidates only for "auto"', () => {
    const draft = defaultDraft()
    expect(keys(draft)).toEqual(['partitions', 'memory_reuse'])
    expect(keys(withPipeline(draft, 'partitions', 8))).toEqual(['partitions', 'memory_reuse'])
    const auto = withPipeline(draft, 'partitions', 'auto')
    expect(keys(auto)).toEqual(['partitions', 'candidates', 'memory_reuse'])
    expect(sectionOff('pipeline', auto)).toBe(false)
    expect(sectionOff('pipeline', withPipeline(draft, 'memory_reuse', 'S4'))).toBe(false)
    // A hidden candidates list with an issue shows anyway.
    const stale = withPipeline(draft, 'candidates', [])
    expect(keys(stale, ['pipeline.candidates'])).toEqual(['partitions', 'candidates', 'memory_reuse'])
  })

  it('place the schema’s messages on the field they name', () => {
    const issues = (key: string, value: unknown) => checkDraft(withPipeline(defaultDraft(), key, value)).issues
    expect(issues('partitions', 65)).toEqual([{ path: 'pipeline.partitions', message: 'must be a whole number in [1, 64] or "auto"' }])
    expect(issues('partitions', 'x')).toEqual([{ path: 'pipeline.partitions', message: 'must be a whole number in [1, 64] or "auto"' }])
    expect(issues('candidates', [])).toEqual([{ path: 'pipeline.candidates', message: 'must list at least one partition count' }])
    expect(issues('candidates', '1, x')).toEqual([{ path: 'pipeline.candidates', message: 'must list partition counts, each a whole number in [1, 64]' }])
    expect(issues('candidates', [2, 99]).map((i) => i.path)).toEqual(['pipeline.candidates.1'])
    expect(issues('partitions', 'auto')).toEqual([])
  })

  it('name placement.devices when a pipeline is asked for with offload', () => {
    const offloaded = withField(withField(defaultDraft(), { section: 'offload', key: 'mode' }, 'ssd'), { section: 'offload', key: 'expert_slots' }, 2)
    const withCache = withField(offloaded, { section: 'offload', key: 'cache_experts' }, 4)
    expect(checkDraft(withCache).issues).toEqual([])
    expect(checkDraft(withPipeline(withCache, 'memory_reuse', 'S2')).issues.map((i) => i.path)).toEqual(['placement.devices'])
  })
})
