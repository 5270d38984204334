// The run config's finetune section: the contract's fields and defaults, per-method defaults (resolveFinetune),
// and errors that name the field (unknown groups and targets listing the valid ones).
import { describe, expect, test } from 'vitest'

import { RunConfigSchema } from '../../main/api/config'
import { FINETUNE_GROUPS, resolveFinetune } from '../../main/api/finetune'
import { engineConfigJson } from '../../main/host/runs/engine-config'

const base = {
  model: { arch: 'mixtral', vocab_size: 16, d_model: 8, n_layers: 3, n_heads: 2, n_kv_heads: 1, max_seq_len: 8, d_ff: 4,
    n_experts: 4, top_k: 2, dense_layers: [1] },
  train: { batch_size: 1, seq_len: 8 },
}
const withFinetune = (finetune: unknown) => RunConfigSchema.safeParse({ ...base, finetune })
const issues = (finetune: unknown) => {
  const r = withFinetune(finetune)
  return r.success ? [] : r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`)
}

describe('finetune section', () => {
  test('absent or null is full training of everything, as before', () => {
    expect(RunConfigSchema.parse(base).finetune).toBeUndefined()
    expect(withFinetune(null).success).toBe(true)
    expect(resolveFinetune(null)).toBeNull()
  })

  test('defaults per method', () => {
    const full = resolveFinetune(RunConfigSchema.parse({ ...base, finetune: { method: 'full' } }).finetune)
    expect(full).toEqual({ method: 'full', train: [...FINETUNE_GROUPS], experts: null, lora: null, esft: null })
    const lora = resolveFinetune(RunConfigSchema.parse({ ...base, finetune: { method: 'lora', lora: {} } }).finetune)
    expect(lora?.train).toEqual([]) // the router is frozen by default in LoRA runs
    expect(lora?.lora).toEqual({ rank: 16, alpha: 32, dropout: 0, rslora: false, targets: ['attention', 'experts'] })
    const esft = resolveFinetune(RunConfigSchema.parse({ ...base, finetune: { method: 'esft' } }).finetune)
    expect(esft?.train).toEqual(['experts'])
    expect(esft?.esft).toEqual({ threshold: 0.9, score: 'gate', sample_batches: 32, with: 'full' })
    const esftLora = resolveFinetune(RunConfigSchema.parse({ ...base, finetune: { method: 'esft', esft: { with: 'lora' }, lora: { rank: 4 } } }).finetune)
    expect(esftLora?.train).toEqual([])
    expect(esftLora?.lora?.targets).toEqual(['experts'])
    const explicit = resolveFinetune(RunConfigSchema.parse({ ...base, finetune: { method: 'lora', train: ['router'], lora: { targets: ['dense_mlp'] } } }).finetune)
    expect(explicit?.train).toEqual(['router'])
    expect(explicit?.lora?.targets).toEqual(['dense_mlp'])
  })

  test('errors name the field', () => {
    expect(issues({ method: 'lora' })).toEqual(['finetune.lora: required when the method is lora'])
    expect(issues({ method: 'esft', esft: { with: 'lora' } })).toEqual(['finetune.lora: required when the method is esft with "with": "lora"'])
    expect(issues({ method: 'lora', lora: { rank: 0 } })).toEqual(['finetune.lora.rank: must be at least 1'])
    expect(issues({ method: 'lora', lora: { alpha: 0 } })).toEqual(['finetune.lora.alpha: must be greater than 0'])
    expect(issues({ method: 'lora', lora: { dropout: 1 } })).toEqual(['finetune.lora.dropout: must be in [0, 1)'])
    expect(issues({ method: 'esft', esft: { threshold: 0 } })).toEqual(['finetune.esft.threshold: must be in (0, 1]'])
    expect(issues({ method: 'esft', esft: { threshold: 1.01 } })).toEqual(['finetune.esft.threshold: must be in (0, 1]'])
    expect(issues({ method: 'esft', esft: { sample_batches: 0 } })).toEqual(['finetune.esft.sample_batches: must be at least 1'])
    expect(issues({ method: 'full', esft: {} })).toEqual(['finetune.esft: only for the esft method'])
    expect(issues({ method: 'full', lora: {} })).toEqual(['finetune.lora: only when the method uses LoRA (lora, or esft with "with": "lora")'])
    expect(issues({ method: 'sparse' })[0]).toMatch(/^finetune\.method: /)
  })

  test('unknown groups and targets are refused listing the valid ones; duplicates too', () => {
    expect(issues({ method: 'full', train: ['experts', 'mlp'] })).toEqual([
      'finetune.train.1: unknown parameter group; valid: embeddings, attention, norms, router, experts, shared_experts, dense_mlp, lm_head',
    ])
    expect(issues({ method: 'lora', lora: { targets: ['router'] } })).toEqual([
      'finetune.lora.targets.0: unknown LoRA target; valid: attention, experts, shared_experts, dense_mlp',
    ])
    expect(issues({ method: 'full', train: ['router', 'router'] })).toEqual(['finetune.train.1: "router" is listed twice'])
  })

  test('experts: MoE layers of this model and experts they have', () => {
    expect(issues({ method: 'esft', experts: { 0: [0, 3], 2: [1] } })).toEqual([])
    expect(issues({ method: 'esft', experts: { 1: [0] } })).toEqual(['finetune.experts.1: layer 1 is not an MoE layer (MoE layers: 0, 2)'])
    expect(issues({ method: 'esft', experts: { 0: [4] } })).toEqual(['finetune.experts.0.0: expert 4 does not exist (layer 0 has 4)'])
    expect(issues({ method: 'esft', experts: { 0: [1, 1] } })).toEqual(['finetune.experts.0.1: expert 1 is listed twice'])
    expect(issues({ method: 'esft', experts: { first: [1] } })[0]).toMatch(/^finetune\.experts\.first: /)
    expect(issues({ method: 'esft', bogus: 1 })[0]).toMatch(/^finetune: /)
  })
})

describe('what the engine refuses with a fine-tune, refused here by the same field', () => {
  const parseIssues = (config: unknown) => {
    const r = RunConfigSchema.safeParse(config)
    return r.success ? [] : r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`)
  }
  const slots = { expert_slots: 2 }
  test('several devices or a pipeline; expert offload runs', () => {
    const finetune = { method: 'lora', lora: {} }
    expect(parseIssues({ ...base, finetune, offload: { mode: 'host', ...slots } })).toEqual([])
    expect(parseIssues({ ...base, finetune, offload: { mode: 'ssd', ...slots, cache_experts: 4 } })).toEqual([])
    expect(parseIssues({ ...base, finetune, placement: { devices: 2 } })[0]).toMatch(/^finetune: experts on several devices or pipelined \(placement\.devices > 1, pipeline\)/)
    expect(parseIssues({ ...base, finetune, pipeline: { partitions: 2 } })[0]).toMatch(/^finetune: experts on several devices or pipelined/)
    // Without a finetune section, or with any offload mode, nothing is refused here.
    expect(parseIssues({ ...base, offload: { mode: 'host', ...slots } })).toEqual([])
    expect(parseIssues({ ...base, finetune, offload: { mode: 'auto' } })).toEqual([])
  })
  test('"attention" adapters on latent attention are taken (each projection gets its own)', () => {
    const mla = { ...base, model: { ...base.model, n_kv_heads: 2,
      latent_attention: { q_lora_rank: 0, kv_lora_rank: 4, qk_nope_head_dim: 2, qk_rope_head_dim: 2, v_head_dim: 2 } } }
    // lora's default targets include attention
    expect(parseIssues({ ...mla, finetune: { method: 'lora', lora: {} } })).toEqual([])
    expect(parseIssues({ ...mla, finetune: { method: 'lora', lora: { targets: ['experts', 'attention'] } } })).toEqual([])
    expect(parseIssues({ ...mla, finetune: { method: 'esft', esft: { with: 'lora' }, lora: {} } })).toEqual([])
  })
})

describe('the engine’s config', () => {
  test('gets the finetune section only when there is one', () => {
    expect(JSON.parse(engineConfigJson(RunConfigSchema.parse(base), null))).not.toHaveProperty('finetune')
    expect(JSON.parse(engineConfigJson(RunConfigSchema.parse({ ...base, finetune: null }), null))).not.toHaveProperty('finetune')
    const esft = RunConfigSchema.parse({ ...base, finetune: { method: 'esft', experts: { 0: [1] } } })
    expect(JSON.parse(engineConfigJson(esft, null)).finetune).toEqual({ method: 'esft', experts: { 0: [1] } })
  })
})
