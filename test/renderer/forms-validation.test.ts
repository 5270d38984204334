// Validation messages land next to the field they name: the client's from RunConfigSchema, the
// host's from runs.create issue paths (spec.config.model.top_k).
import { describe, expect, it } from 'vitest'

import { defaultDraft, withField } from '../../renderer/forms/config-draft'
import { allFields } from '../../renderer/forms/schema-fields'
import { checkDraft, formPathOfServerIssue, placeIssues } from '../../renderer/forms/validation'

const paths = [...allFields().map((f) => f.path), 'name', 'dataset.path', 'dataset.tokenizer', 'init']
const at = (path: string) => allFields().find((f) => f.path === path)!

describe('client-side validation', () => {
  it('accepts the defaults and fills them in', () => {
    const { config, issues } = checkDraft(defaultDraft())
    expect(issues).toEqual([])
    expect(config?.train.steps).toBe(1000)
  })

  it('names the field of a range error and of a cross-field rule', () => {
    let draft = withField(defaultDraft(), at('model.top_k'), 99)
    const { byField } = placeIssues(checkDraft(draft).issues, paths)
    expect(Object.keys(byField)).toEqual(['model.top_k'])
    expect(byField['model.top_k']![0]).toMatch(/64/)

    draft = withField(defaultDraft(), at('model.n_heads'), 3)
    expect(placeIssues(checkDraft(draft).issues, paths).byField['model.n_heads']).toEqual(['must divide d_model (256)'])
  })

  it('puts a per-layer list entry issue on the list field', () => {
    const draft = withField(defaultDraft(), at('model.n_experts'), [8, 70000, 8, 8])
    const placed = placeIssues(checkDraft(draft).issues, paths)
    expect(Object.keys(placed.byField)).toEqual(['model.n_experts'])
    expect(placed.unplaced).toEqual([])
  })

  it('reports a list of the wrong length against the MoE layer count', () => {
    const draft = withField(defaultDraft(), at('model.n_experts'), [8, 8])
    expect(placeIssues(checkDraft(draft).issues, paths).byField['model.n_experts']).toEqual(['needs one entry per MoE layer (4)'])
  })
})

describe('server-side issues', () => {
  it('maps runs.create paths onto form fields', () => {
    expect(formPathOfServerIssue('spec.config.model.top_k')).toBe('model.top_k')
    expect(formPathOfServerIssue('spec.dataset.path')).toBe('dataset.path')
    expect(formPathOfServerIssue('spec.init')).toBe('init')
    const issues = [
      { path: 'spec.config.model.vocab_size', message: 'set it to at least 300' },
      { path: 'spec.dataset.path', message: '/x does not exist' },
      { path: 'spec', message: 'unrecognized key' },
    ].map((i) => ({ ...i, path: formPathOfServerIssue(i.path) }))
    const placed = placeIssues(issues, paths)
    expect(placed.byField).toEqual({ 'model.vocab_size': ['set it to at least 300'], 'dataset.path': ['/x does not exist'] })
    expect(placed.unplaced).toEqual([{ path: 'spec', message: 'unrecognized key' }])
  })
})
