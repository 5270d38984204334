// The Checkpoints view's model options: the family and every feature the config derives (listed generically from
// modelFeatures, so a new feature shows without code of its own), the layer and routing choices, and the run's
// load balancing.
import { describe, expect, it } from 'vitest'

import { RunConfigSchema } from '../../main/api/config'
import { modelFeatures } from '../../main/api/model-families'
import { modelOptions, optionText } from '../../renderer/checkpoints/model-options'

const config = (model: Record<string, unknown>, train: Record<string, unknown> = {}) =>
  RunConfigSchema.parse({ model: { arch: 'mixtral', n_layers: 4, ...model }, train: { seq_len: 64, ...train } })

describe('checkpoint model options', () => {
  it('lists the family and each feature that is on, by its name', () => {
    const c = config({})
    const texts = modelOptions(c).map(optionText)
    expect(texts[0]).toBe('arch: mixtral')
    expect(texts).toContain('norm: rmsnorm')
    expect(texts).toContain('position: rope')
    expect(texts).toContain('attention: gqa')
    expect(texts).toContain('MoE layers: 4 of 4')
    expect(texts).toContain('top k: 2 of 8')
    // Every true or valued feature is there, whatever its name; false ones are not.
    for (const [key, value] of Object.entries(modelFeatures(c.model)))
      if (value === true) expect(texts).toContain(key.replace(/_/g, ' '))
      else if (value === false) expect(texts).not.toContain(key.replace(/_/g, ' '))
    expect(texts).not.toContain('selection bias')
    expect(texts.some((t) => t.endsWith(': none'))).toBe(false)
  })

  it('shows a feature a config turns on, by the feature’s own name and value', () => {
    const texts = modelOptions(config({ qk_norm: 'head', head_dim: 32 })).map(optionText)
    expect(texts).toContain('qk norm: head')
  })

  it('shows the dense layers, head size, routed scaling, selection bias and load-balancing rate where set', () => {
    const c = config(
      { dense_layers: [0], n_experts: 4, head_dim: 32, routed_scaling_factor: 2.5, selection_bias: true },
      { balance_bias_rate: 1e-3 },
    )
    const texts = modelOptions(c).map(optionText)
    expect(texts).toEqual(expect.arrayContaining([
      'MoE layers: 3 of 4', 'dense layers: 0', 'head dim: 32', 'top k: 2 of 4', 'routed scaling factor: 2.5', 'selection bias',
      'aux-loss-free balancing: rate 0.001',
    ]))
  })
})
