// The New-run form's routing-skew section: generated from the schema like the rest, only the fields the
// distribution uses shown.
import { describe, expect, it } from 'vitest'

import { defaultDraft, draftFromConfig } from '../../renderer/forms/config-draft'
import { rangeText } from '../../renderer/forms/schema-fields'
import { checkDraft } from '../../renderer/forms/validation'
import { tinyConfig } from './compare-fixtures'
import { type Draft, field, fieldSetter, formSection, shownKeys } from './form-fixtures'

const skewSection = () => formSection('routing_skew')
const withSkew = fieldSetter('routing_skew')
const keys = (draft: Draft, issues?: string[]) => shownKeys('routing_skew', draft, issues)

describe('routing skew fields', () => {
  it('come from the schema under their own title, with kinds, defaults, ranges and help', () => {
    expect(skewSection().title).toBe('Routing skew (experiment)')
    expect(field('routing_skew.distribution')).toMatchObject({ kind: 'enum', options: ['none', 'uniform', 'zipf', 'hot'], defaultValue: 'none' })
    expect(field('routing_skew.distribution').description).toMatch(/^Experiment: .*not training a real router/)
    expect(field('routing_skew.zipf_s')).toMatchObject({ kind: 'number', min: 0, max: 10, defaultValue: 1.2 })
    expect(field('routing_skew.hot_fraction')).toMatchObject({ kind: 'number', min: 0, max: 1, defaultValue: 0.95 })
    expect(field('routing_skew.seed')).toMatchObject({ kind: 'integer', min: 0, defaultValue: 0 })
    expect(rangeText(field('routing_skew.seed'))).toBe('≥ 0')
    expect(skewSection().fields.every((f) => f.description)).toBe(true)
  })

  it('default to off, and a default draft is a valid config whose skew is off', () => {
    const draft = defaultDraft()
    expect(draft.routing_skew).toEqual({ distribution: 'none', zipf_s: 1.2, hot_fraction: 0.95, seed: 0 })
    expect(checkDraft(draft).config?.routing_skew?.distribution).toBe('none')
    expect(checkDraft(draftFromConfig(tinyConfig)).config?.routing_skew).toEqual({ distribution: 'none', zipf_s: 1.2, hot_fraction: 0.95, seed: 0 })
  })

  it('show what the distribution uses', () => {
    const off = defaultDraft()
    expect(keys(off)).toEqual(['distribution'])
    expect(keys(withSkew(off, 'distribution', 'uniform'))).toEqual(['distribution', 'seed'])
    expect(keys(withSkew(off, 'distribution', 'zipf'))).toEqual(['distribution', 'zipf_s', 'seed'])
    expect(keys(withSkew(off, 'distribution', 'hot'))).toEqual(['distribution', 'hot_fraction', 'seed'])
    // A hidden field with an issue shows anyway, and the issue is the schema's range.
    const stale = withSkew(off, 'zipf_s', 11)
    expect(checkDraft(stale).issues.map((i) => i.path)).toEqual(['routing_skew.zipf_s'])
    expect(keys(stale, ['routing_skew.zipf_s'])).toEqual(['distribution', 'zipf_s'])
  })
})
