// The Models view's card rows and the config "Plan memory" sends, from a model card.
import { describe, expect, it } from 'vitest'

import { ModelConfigSchema } from '../../main/api/config'
import type { ModelCard } from '../../main/api/model-card'
import { cardFacts, formatCount, planConfig } from '../../renderer/models/card'

const card: ModelCard = {
  dir: '/models/q',
  modelType: 'qwen3_moe',
  label: 'Qwen3-MoE',
  architecture: 'Qwen3MoeForCausalLM',
  supported: false,
  problems: ['x'],
  notes: [],
  model: ModelConfigSchema.parse({ arch: 'mixtral', n_layers: 4, max_seq_len: 128, n_experts: 8, top_k: 2 }),
  shape: { layers: 4, moeLayers: 3, expertsPerLayer: 8, topK: 2, sharedExpert: true, totalParams: 30.5e9, activeParams: 3.3e9 },
  weights: {
    format: 'sharded',
    complete: false,
    shards: [{ file: 'a', present: true }, { file: 'b', present: false }],
    dtypes: { BF16: 10, F8_E4M3: 4 },
    bytes: 3 * 1024 ** 3,
    tensors: 14,
    expectedTensors: 12,
    expertLayout: 'fused',
  },
  tokenizer: { tokenizerJson: true, tokenizerConfig: true, chatTemplate: null },
}

describe('model card rows', () => {
  it('says the shape, parameters, dtypes, shards and tokenizer, flagging what is missing', () => {
    const rows = Object.fromEntries(cardFacts(card).map((f) => [f.label, f]))
    expect(rows['Layers']!.value).toBe('4 (3 MoE, 1 dense)')
    expect(rows['Experts per layer']!.value).toBe('8 + a shared expert')
    expect(rows['Parameters']!.value).toBe('30.5 B total · 3.30 B active per token')
    expect(rows['Dtype on disk']!.value).toBe('BF16 (10), F8_E4M3 (4)')
    expect(rows['Weights']).toEqual({ label: 'Weights', value: '1 of 2 shards · 3.00 GiB', warn: true })
    expect(rows['Tensors']!.value).toBe('14 stored, 12 expected · fused experts')
    expect(rows['Chat template']).toEqual({ label: 'Chat template', value: 'none found', warn: true })
    expect(rows['Engine family']!.value).toBe('mixtral')
    expect(formatCount(950)).toBe('950')
  })

  it('plans the model with sequences no longer than its positions', () => {
    expect(planConfig(card)).toEqual({ model: card.model, train: { seq_len: 128 } })
    expect(planConfig({ ...card, model: null })).toBeNull()
  })
})
