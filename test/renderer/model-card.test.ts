// The Models view's card rows and the config "Plan memory" sends, from a model card.
import { describe, expect, it } from 'vitest'

import { ModelConfigSchema } from '../../main/api/config'
import type { ModelCard } from '../../main/api/model-card'
import { cardFacts, formatCount, planConfig } from '../../renderer/models/card'
import { computedAs } from '../../renderer/models/computed-as'

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
    expect(rows['Computed as']!.value).toBe('mixtral family: RMSNorm · RoPE θ 10,000 · grouped-query attention (4 q / 4 kv heads) · '
      + 'SwiGLU experts · softmax router, top-2 renormalised')
    expect(formatCount(950)).toBe('950')
  })

  it('plans the model with sequences no longer than its positions', () => {
    expect(planConfig(card)).toEqual({ model: card.model, train: { seq_len: 128 } })
    expect(planConfig({ ...card, model: null })).toBeNull()
  })

  it("says how the engine computes each family's imports, beyond the family's name", () => {
    const base = { arch: 'mixtral', n_layers: 4, n_experts: 8, top_k: 2 }
    const qwen3 = ModelConfigSchema.parse({ ...base, n_heads: 32, n_kv_heads: 4, qk_norm: 'head', rope_theta: 1e6,
      rope_scaling: { type: 'yarn', factor: 4, original_max_position_embeddings: 32768 }, top_k: 8, n_experts: 128,
      renormalize: true, d_model: 2048, head_dim: 128 })
    expect(computedAs(qwen3)).toBe('mixtral family: RMSNorm · RoPE θ 1,000,000 with YaRN ×4 · grouped-query attention '
      + '(32 q / 4 kv heads) · q/k norm per head · SwiGLU experts · softmax router, top-8 renormalised')
    const olmoe = ModelConfigSchema.parse({ ...base, qk_norm: 'projection', clip_qkv: 8, renormalize: false })
    expect(computedAs(olmoe)).toBe('mixtral family: RMSNorm · RoPE θ 10,000 · grouped-query attention (4 q / 4 kv '
      + 'heads) · q/k norm over the projection · q/k/v clipped at ±8 · SwiGLU experts · softmax router, top-2')
    const deepseek = ModelConfigSchema.parse({ ...base, shared_expert_d_ff: 64, qkv_bias: false,
      latent_attention: { kv_lora_rank: 4, qk_nope_head_dim: 2, qk_rope_head_dim: 2, v_head_dim: 2 },
      router: { scoring: 'sigmoid', selection: 'noaux_tc', n_group: 2, topk_group: 1 } })
    expect(computedAs(deepseek)).toBe('mixtral family: RMSNorm · RoPE θ 10,000 · multi-head latent attention · '
      + 'SwiGLU experts · a shared expert · sigmoid router, bias-corrected group top-2 renormalised')
    const gptOss = ModelConfigSchema.parse({ ...base, arch: 'gpt-oss', sliding_window: 128, sliding_layers: [0, 2] })
    expect(computedAs(gptOss)).toBe('gpt-oss family: RMSNorm · RoPE θ 10,000 · grouped-query attention (4 q / 4 kv '
      + 'heads) · a 128-token window on 2 of 4 layers · attention sinks · clamped SwiGLU experts · softmax router, '
      + 'top-2 renormalised · q/k/v, out, expert, router biases')
  })
})
