// Ablation sets: each component switch changes exactly that component, a sweep makes one run per
// value, and every run is named after what it changes.
import { describe, expect, it } from 'vitest'

import { RunConfigSchema, type RunConfig } from '../../main/api/config'
import {
  ABLATION_COMPONENTS,
  componentAblation,
  sweepableFields,
  sweepRuns,
  sweepValueProblems,
} from '../../renderer/forms/ablation'
import { allFields } from '../../renderer/forms/schema-fields'
import { configDiff } from '../../renderer/views/compare/config-diff'

// Every component on, so each has something to switch off.
const full: RunConfig = RunConfigSchema.parse({
  model: { arch: 'mixtral', d_model: 64, n_layers: 2, n_heads: 4, n_experts: 4, top_k: 2, aux_loss_coef: 0.01, z_loss_coef: 0.001, shared_expert_d_ff: 64, shared_expert_gate: true, residual_mlp: true },
  train: { steps: 20 },
  offload: { mode: 'auto' },
})
const field = (path: string) => allFields().find((f) => f.path === path)!

describe('component ablation', () => {
  it('switches off exactly one component per run, and the result is valid', () => {
    for (const component of ABLATION_COMPONENTS) {
      expect(component.unavailable(full)).toBeNull()
      const off = component.switchOff(full)
      const changed = configDiff([full, off]).map((row) => row.path)
      expect(changed.length, component.id).toBeGreaterThan(0)
      expect(changed.every((path) => component.fields.includes(path)), `${component.id} changed ${changed.join(', ')}`).toBe(true)
      expect(RunConfigSchema.safeParse(off).success, component.id).toBe(true)
    }
  })

  it('flips capacity both ways: dropless gets capacity 1.0, a capacity gets dropless', () => {
    const capacity = ABLATION_COMPONENTS.find((c) => c.id === 'capacity')!
    expect(capacity.label(full)).toBe('capacity 1.0')
    expect(capacity.switchOff(full).model.capacity_factor).toBe(1)
    const padded = { ...full, model: { ...full.model, capacity_factor: 1.25 } }
    expect(capacity.label(padded)).toBe('dropless')
    expect(capacity.switchOff(padded).model.capacity_factor).toBeNull()
  })

  it('names the runs after the base and the component, baseline first', () => {
    const runs = componentAblation(full, 'tiny', ABLATION_COMPONENTS.map((c) => c.id), true)
    expect(runs.map((r) => r.name)).toEqual([
      'tiny · baseline',
      'tiny · no aux loss',
      'tiny · no z-loss',
      'tiny · capacity 1.0',
      'tiny · no shared expert',
      'tiny · no residual MLP',
      'tiny · no renormalize',
      'tiny · no pinning',
      'tiny · no upload pipelining',
      'tiny · no optimizer overlap',
      'tiny · no prefetch',
    ])
    expect(runs.every((r) => r.issues.length === 0)).toBe(true)
  })

  it('skips components the config does not have, and ones not chosen', () => {
    const plain = RunConfigSchema.parse({ model: { arch: 'mixtral', aux_loss_coef: 0 }, train: {} })
    const names = componentAblation(plain, 'p', ABLATION_COMPONENTS.map((c) => c.id), false).map((r) => r.name)
    expect(names).toEqual(['p · capacity 1.0', 'p · no renormalize'])
    expect(componentAblation(full, 'tiny', ['z-loss'], false).map((r) => r.name)).toEqual(['tiny · no z-loss'])
  })

  it('offers the offload ablations only where they switch something off', () => {
    const byId = (id: string) => ABLATION_COMPONENTS.find((c) => c.id === id)!
    const host = RunConfigSchema.parse({ ...full, offload: { mode: 'host', expert_slots: 2 } })
    expect(byId('pinning').unavailable(RunConfigSchema.parse({ ...full, offload: undefined }))).toBe('this config keeps every expert resident')
    expect(byId('prefetch').unavailable(host)).toBe('only the SSD tier prefetches')
    expect(byId('lookahead').unavailable(host)).toBeNull()
    expect(byId('lookahead').switchOff(host).offload).toMatchObject({ mode: 'host', expert_slots: 2, lookahead: 0 })
    expect(byId('pinning').unavailable({ ...host, offload: { ...host.offload!, pin_policy: 'none' } })).toBe('no expert is pinned already')
  })
})

describe('sweep', () => {
  it('offers the numeric fields only', () => {
    const kinds = new Set(sweepableFields().map((f) => f.kind))
    expect([...kinds].sort()).toEqual(['integer', 'number', 'number-or-list'])
    expect(sweepableFields().map((f) => f.path)).toContain('model.n_experts')
  })

  it('makes one run per value, changing only the swept field', () => {
    const runs = sweepRuns(full, 'tiny', field('model.top_k'), [1, 2])
    expect(runs.map((r) => r.name)).toEqual(['tiny · top_k=1', 'tiny · top_k=2'])
    expect(configDiff(runs.map((r) => r.config)).map((row) => row.path)).toEqual(['model.top_k'])
    const lr = sweepRuns(full, 'tiny', field('train.lr'), [1e-3, 3e-3])
    expect(lr.map((r) => r.config.train.lr)).toEqual([1e-3, 3e-3])
  })

  it('sweeps n_experts as one number for every layer, flagging values top_k cannot use', () => {
    const runs = sweepRuns(full, 'tiny', field('model.n_experts'), [1, 4, 8])
    expect(runs.map((r) => r.config.model.n_experts)).toEqual([1, 4, 8])
    expect(runs[0]!.issues).toEqual([{ path: 'model.top_k', message: 'exceeds the experts of a layer' }])
    expect(runs[1]!.issues).toEqual([])
  })

  it('checks the typed values against the field', () => {
    expect(sweepValueProblems(field('model.top_k'), [1, 2])).toEqual([])
    expect(sweepValueProblems(field('model.top_k'), [0, 1.5, 1.5])).toEqual(['a value is listed twice', '0 is below 1', '1.5 is not a whole number', '1.5 is not a whole number'])
    expect(sweepValueProblems(field('model.capacity_factor'), [0])).toEqual(['0 must exceed 0'])
  })
})
