// What trains under each finetune method, counted by hand for a small mixtral (vocab 16, d_model 8, 2 layers,
// 2 heads of 4 with 1 kv head, 4 experts of d_ff 4, SwiGLU, no biases, untied head):
//   wte 128, lm_head 128, norm_f 8; per layer: norm1 8, qkv (2 + 2)·4 × 8 = 128, out 8 × 8 = 64, norm2 8,
//   router 4 × 8 = 32, each expert gate_up 8 × 8 = 64 + down 8 × 4 = 32 = 96 → per layer 624; total 1512.
// LoRA at rank 2: q 2(8+8) = 32, k 2(8+4) = 24, v 24, o 2(8+8) = 32 → 112 per layer; an expert's gate, up and down
// 2(8+4) = 24 each → 72.
import { describe, expect, test } from 'vitest'

import { RunConfigSchema, type RunConfig } from '../../main/api/config'
import { finetuneCounts, finetuneVerdict } from '../../main/host/planner/finetune-plan'
import { finetuneGroupOf, layoutTensors } from '../../main/host/planner/layout-tensors'
import { countParams } from '../../main/host/planner/param-count'
import { planRun } from '../../main/host/planner/plan'
import { listPresets } from '../../main/host/catalog'

const model = { arch: 'mixtral', vocab_size: 16, d_model: 8, n_layers: 2, n_heads: 2, n_kv_heads: 1, max_seq_len: 8, d_ff: 4, n_experts: 4, top_k: 2 }
const config = (finetune: unknown, train: object = {}): RunConfig =>
  RunConfigSchema.parse({ model, train: { batch_size: 1, seq_len: 8, ...train }, finetune })

describe('layout tensors and their finetune groups', () => {
  test('the tensors sum to the planner’s parameter count for every preset', () => {
    for (const preset of listPresets()) {
      const sum = layoutTensors(preset.config.model).reduce((s, t) => s + t.numel, 0)
      expect(sum, preset.name).toBe(countParams(preset.config.model).total)
    }
    expect(layoutTensors(config(null).model).reduce((s, t) => s + t.numel, 0)).toBe(1512)
  })

  test('groups by name, as the engine groups its layout', () => {
    expect(finetuneGroupOf('wte')).toBe('embeddings')
    expect(finetuneGroupOf('wpe')).toBe('embeddings')
    expect(finetuneGroupOf('lm_head.weight')).toBe('lm_head')
    expect(finetuneGroupOf('norm_f.bias')).toBe('norms')
    expect(finetuneGroupOf('layers.3.norm2.weight')).toBe('norms')
    expect(finetuneGroupOf('layers.0.attn.q_norm.weight')).toBe('attention')
    expect(finetuneGroupOf('layers.0.attn.kv_a_norm.weight')).toBe('attention')
    expect(finetuneGroupOf('layers.0.attn.sinks')).toBe('attention')
    expect(finetuneGroupOf('layers.1.moe.router.bias')).toBe('router')
    expect(finetuneGroupOf('layers.1.moe.router.selection_bias')).toBeNull()
    expect(finetuneGroupOf('layers.1.moe.experts.7.down.weight')).toBe('experts')
    expect(finetuneGroupOf('layers.1.moe.shared_gate.weight')).toBe('shared_experts')
    expect(finetuneGroupOf('layers.1.moe.shared.fc.weight')).toBe('shared_experts')
    expect(finetuneGroupOf('layers.1.moe.residual.fc.bias')).toBe('dense_mlp')
    expect(finetuneGroupOf('layers.0.mlp.gate_up.weight')).toBe('dense_mlp')
    expect(() => finetuneGroupOf('layers.0.bogus')).toThrow('no finetune group for tensor "layers.0.bogus"')
  })
})

describe('trainable counts', () => {
  test('full (and no section): everything trains', () => {
    expect(finetuneCounts(config(null))).toEqual({ trainableBase: 1512, adapters: 0, trainable: 1512, frozen: 0, base: 1512 })
    expect(finetuneCounts(config({ method: 'full', train: ['router', 'lm_head'] })).trainable).toBe(64 + 128)
  })

  test('esft: only the chosen experts train', () => {
    const c = finetuneCounts(config({ method: 'esft', experts: { 0: [1, 3], 1: [2] } }))
    expect(c).toEqual({ trainableBase: 288, adapters: 0, trainable: 288, frozen: 1224, base: 1512 })
    // A layer not listed: all its experts.
    expect(finetuneCounts(config({ method: 'esft', experts: { 0: [1] } })).trainable).toBe(96 + 4 * 96)
  })

  test('lora: adapters of r·(in + out) per adapted linear', () => {
    expect(finetuneCounts(config({ method: 'lora', lora: { rank: 2 } }))).toEqual({
      trainableBase: 0, adapters: 2 * 112 + 8 * 72, trainable: 800, frozen: 1512, base: 1512,
    })
    // The router trained, experts adapted only where listed (layer 1: expert 0).
    const c = finetuneCounts(config({ method: 'lora', train: ['router'], experts: { 1: [0] }, lora: { rank: 2 } }))
    expect(c).toEqual({ trainableBase: 64, adapters: 224 + 4 * 72 + 72, trainable: 648, frozen: 1448, base: 1512 })
    // ESFT with LoRA: experts only, the chosen ones.
    expect(finetuneCounts(config({ method: 'esft', esft: { with: 'lora' }, experts: { 0: [0], 1: [1, 2] }, lora: { rank: 2 } })).trainable).toBe(3 * 72)
  })
})

describe('memory verdict', () => {
  test('trained parameters keep 16 bytes, frozen ones 4 (2 as bf16 with bf16 compute)', () => {
    const v = finetuneVerdict(config({ method: 'lora', lora: { rank: 2 } }), { mode: 'none' })
    expect(v.tiers[0]).toEqual({ tier: 'device', trainable: 3200, grads: 3200, optimizer: 6400, frozen: 6048, total: 18848 })
    expect(v.fullStateBytes).toBe(16 * 1512)
    expect(v.stateBytes).toBe(18848)
    expect(finetuneVerdict(config({ method: 'lora', lora: { rank: 2 } }), { mode: 'none', frozenBf16: true }).tiers[0]!.frozen).toBe(6048)
    const bf16 = finetuneVerdict(config({ method: 'lora', lora: { rank: 2 } }, { compute_dtype: 'bf16' }), { mode: 'none', frozenBf16: true })
    expect(bf16.frozenDtype).toBe('bf16')
    expect(bf16.tiers[0]!.frozen).toBe(3024)
  })

  // bf16 compute keeps a bf16 copy of the whole arena (2 B per padded float) and, on the cpu backend, packs each
  // frozen linear weight twice for its GEMMs (4 B per parameter): here under LoRA every qkv (128), out (64), expert
  // (4 × 96) and lm_head (128) weight is frozen, 2 × 576 + 128 = 1280 parameters; the router and norms are not linear.
  test('bf16 compute books its weight copies on the device', () => {
    const budgets = { device: 1 << 30, host: 1 << 30, ssd: null }
    const lora = { method: 'lora', lora: { rank: 2 } }
    const device = (c: RunConfig) => planRun(c, budgets).tiers.find((t) => t.tier === 'device')!
    const fp32 = device(config(lora))
    const arena = fp32.params  // fp32: the arena, 4 B per padded float
    expect(device(config(lora, { compute_dtype: 'bf16' })).params - arena).toBe(arena / 2 + 4 * 1280)
    expect(device(config(lora, { compute_dtype: 'bf16', backend: 'cuda' })).params - arena).toBe(arena / 2)
    expect(device(config(lora, { compute_dtype: 'bf16', pack_frozen_bf16: false })).params - arena).toBe(arena / 2)
    // Full training freezes nothing: the copy alone.
    const full = device(config(null))
    expect(device(config(null, { compute_dtype: 'bf16' })).params - full.params).toBe(full.params / 2)
    expect(device(config(null, { compute_dtype: 'bf16' })).total - full.total).toBe(full.params / 2)
    expect(planRun(config(lora, { compute_dtype: 'bf16' }), budgets).formulas.join('\n')).toContain('bf16 copies')
  })

  test('routed experts (adapters included) sit in the offload tier', () => {
    const v = finetuneVerdict(config({ method: 'esft', experts: { 0: [1, 3], 1: [2] } }), { mode: 'host' })
    expect(v.tiers).toEqual([
      { tier: 'device', trainable: 0, grads: 0, optimizer: 0, frozen: 4 * 744, total: 4 * 744 },
      { tier: 'host', trainable: 1152, grads: 1152, optimizer: 2304, frozen: 1920, total: 6528 },
      { tier: 'ssd', trainable: 0, grads: 0, optimizer: 0, frozen: 0, total: 0 },
    ])
  })

  // An expert: base 96 floats (384 B); its LoRA adapters (gate, up, down at rank 2, A and B each padded to 16)
  // 96 floats. Dense trained part: the attention adapters, 128 padded floats per layer.
  test('the offload verdict books a frozen expert base as weights only, in every tier', () => {
    const budgets = { device: 1 << 30, host: 1 << 30, ssd: null }
    const offloaded = (finetune: unknown, offload: object): RunConfig =>
      RunConfigSchema.parse({ model, train: { batch_size: 1, seq_len: 8 }, finetune, offload })
    const lora = { method: 'lora', lora: { rank: 2 } }
    const host = planRun(offloaded(lora, { mode: 'host', expert_slots: 2 }), budgets)
    const tier = (p: typeof host, name: string) => p.tiers.find((t) => t.tier === name)!
    // Slots: weights 192 floats + gradient 96 floats each; dense: 1024 B of trained adapters.
    expect(tier(host, 'device')).toMatchObject({ grads: 1024 + 2 * 384, optimizer: 2 * 1024 })
    expect(tier(host, 'host')).toMatchObject({ params: 8 * 768, grads: 8 * 384, optimizer: 8 * 768, total: 8 * 1920 })
    // SSD: a record is the frozen base, one 4 KiB part; the adapters' weights, gradient and two moments (96 floats
    // each, per expert) stay in host memory beside the 4 cache entries.
    const ssd = planRun(offloaded(lora, { mode: 'ssd', expert_slots: 2, cache_experts: 4 }), budgets)
    expect(tier(ssd, 'ssd').total).toBe(8 * 4096)
    expect(tier(ssd, 'host')).toMatchObject({ params: 4 * 4096 + 8 * 384, grads: 8 * 384, optimizer: 8 * 768, total: 4 * 4096 + 8 * 4 * 384 })
    // ESFT: the chosen expert trains whole; the other seven are one weights part each.
    const esft = planRun(offloaded({ method: 'esft', experts: { 0: [1], 1: [] } }, { mode: 'ssd', expert_slots: 2, cache_experts: 4 }), budgets)
    expect(tier(esft, 'ssd').total).toBe(7 * 4096 + 4 * 4096)
    const esftHost = planRun(offloaded({ method: 'esft', experts: { 0: [1], 1: [] } }, { mode: 'host', expert_slots: 2 }), budgets)
    expect(tier(esftHost, 'host')).toMatchObject({ params: 8 * 384, grads: 384, optimizer: 768 })
    // A full run keeps 4 copies of every expert.
    expect(tier(planRun(offloaded(null, { mode: 'host', expert_slots: 2 }), budgets), 'host').total).toBe(4 * 8 * 384)
  })

  test('the plan carries the verdict only with a finetune section', () => {
    const budgets = { device: 1 << 30, host: 1 << 30, ssd: null }
    expect(planRun(config(null), budgets).finetune).toBeNull()
    expect(planRun(config({ method: 'esft' }), budgets).finetune?.counts.trainable).toBe(768)
  })
})
