// The pre-flight planner: its parameter counts equal the engine's tensor layout for every MoE option,
// and its bytes per tier, chosen mode and explanations follow hand-computed numbers for one small model:
//   mixtral V 64, C 32, 2 layers × 4 experts of d_ff 48, heads 4, untied; batch 2 × 16 (N = 32 tokens).
//   dense floats: wte 2048 + lm_head 2048 + norm_f 32 + 2 × (norms 64 + qkv 96·32 + out 32·32 + router 4·32) = 12,704
//     -> D = 50,816 B;  one expert: gate_up 96·32 + down 32·48 = 4,608 floats -> e = 18,432 B;  8 experts -> 147,456 B
//   activations (saved) 56,672 floats = 226,688 B, buffers (scratch) 24,576 floats = 98,304 B
//   device fixed part 4·D + A + B = 528,256 B;  a slot 2·e = 36,864 B
//   SSD record 4 × ⌈18,432 / 4096⌉ × 4096 = 81,920 B
import { describe, expect, it } from 'vitest'

import { RunConfigSchema, type OffloadConfig } from '../../main/api/config'
import type { Plan } from '../../main/api/contract'
import { loadEngineAddon } from '../../main/host/engine/addon'
import { countParams } from '../../main/host/planner/param-count'
import { planRun, type Budgets } from '../../main/host/planner/plan'
import { sizesOf } from '../../main/host/planner/tiers'
import { tinyConfig } from './contract-fixtures'

const base = {
  vocab_size: 64, d_model: 32, n_layers: 4, n_heads: 4, max_seq_len: 16, d_ff: 48, n_experts: 4, top_k: 2,
}
const variants: Record<string, Record<string, unknown>> = {
  'gpt-moe': { arch: 'gpt-moe' },
  'gpt-moe PR-MoE': { arch: 'gpt-moe', moe_every: 2, n_experts: [2, 6], residual_mlp: true, top_k: 1 },
  'mixtral GQA untied': { arch: 'mixtral', n_kv_heads: 2, tie_embeddings: false, expert_d_ff: 24 },
  'qwen2-moe-like': { arch: 'mixtral', shared_expert_d_ff: 40, shared_expert_gate: true, qkv_bias: true, moe_every: 2 },
}

const D = 50_816, E = 18_432, ALL = 147_456, ACT = 226_688, BUF = 98_304, FIXED = 528_256, SLOT = 36_864, RECORD = 81_920
const RESIDENT = 4 * (D + ALL) + ACT + BUF // 1,118,080
const BIG = 2 ** 40

function plan(offload: Partial<OffloadConfig> | undefined, budgets: Partial<Budgets> = {}, backend?: 'cpu' | 'cuda'): Plan {
  const config = RunConfigSchema.parse({
    model: { arch: 'mixtral', vocab_size: 64, d_model: 32, n_layers: 2, n_heads: 4, max_seq_len: 16, d_ff: 48, n_experts: 4, top_k: 2 },
    train: { batch_size: 2, seq_len: 16, ...(backend ? { backend } : {}) },
    ...(offload ? { offload } : {}),
  })
  return planRun(config, { device: BIG, host: BIG, ssd: null, ...budgets })
}

const tier = (p: Plan, name: string) => p.tiers.find((t) => t.tier === name)!

describe('planner: parameter counts', () => {
  it.each(Object.entries(variants))('counts the parameters the engine allocates: %s', (_name, model) => {
    const config = RunConfigSchema.parse({ model: { ...base, ...model }, train: { batch_size: 2, seq_len: 16 } })
    const { Engine } = loadEngineAddon()
    const engine = new Engine(JSON.stringify(config))
    expect(countParams(config.model).total).toBe(engine.numParams)
  })

  it('pads every tensor to 16 floats, as the engine’s arena does', () => {
    // gpt-moe expert, C 40, F 24: fc.weight 960, fc.bias 24 -> 32, proj.weight 960, proj.bias 40 -> 48
    const m = RunConfigSchema.parse({ model: { ...base, arch: 'gpt-moe', d_model: 40, d_ff: 24, n_heads: 4 }, train: { batch_size: 1, seq_len: 16 } }).model
    const counts = countParams(m)
    expect(counts.perExpert[0]).toBe(1984)
    expect(counts.padded.perExpert[0]).toBe(2000)
    expect(counts.padded.experts).toBe(4 * 4 * 2000)
  })

  it('sizes the model of these tests as computed by hand', () => {
    const p = plan(undefined)
    expect(p).toMatchObject({ paramCount: 12_704 + 8 * 4_608, expertParamCount: 8 * 4_608, expertBytes: E })
    expect(tier(p, 'device')).toMatchObject({ activations: ACT, buffers: BUF })
  })
})

describe('planner: resident', () => {
  it('books every state on the device and fits a budget of exactly its total', () => {
    const p = plan({ mode: 'none' }, { device: RESIDENT })
    expect(p).toMatchObject({ requested: 'none', mode: 'none', fits: true, slots: null, cacheExperts: null })
    expect(tier(p, 'device')).toMatchObject({ params: D + ALL, grads: D + ALL, optimizer: 2 * (D + ALL), total: RESIDENT, budget: RESIDENT })
    expect(tier(p, 'host').total).toBe(0)
    expect(p.formulas.join('\n')).toContain('device = 4 × (D + all experts) + activations + buffers')
  })

  it('says by how many bytes the device is short', () => {
    const p = plan(undefined, { device: RESIDENT - 1 })
    expect(p.fits).toBe(false)
    expect(p.explanation).toContain('the device tier is short by 1 bytes')
    expect(p.explanation).toContain(`a device budget of at least ${RESIDENT.toLocaleString('en-US')} bytes would fit`)
    expect(p.explanation).toContain('offload.mode auto')
  })
})

describe('planner: host mode', () => {
  it('books the dense state, activations and the slots on the device, every expert’s state on the host', () => {
    const p = plan({ mode: 'host', expert_slots: 2 })
    expect(p).toMatchObject({ mode: 'host', fits: true, slots: 2, cacheExperts: null })
    expect(tier(p, 'device')).toMatchObject({ params: D + 2 * E, grads: D + 2 * E, optimizer: 2 * D, total: FIXED + 2 * SLOT })
    expect(tier(p, 'device').total).toBe(601_984)
    expect(tier(p, 'host')).toMatchObject({ params: ALL, grads: ALL, optimizer: 2 * ALL, total: 589_824 })
    expect(tier(p, 'ssd').total).toBe(0)
  })

  it('derives the slots from the device budget, at most one per expert', () => {
    // ⌊(600,000 − 528,256) / 36,864⌋ = 1
    expect(plan({ mode: 'host', device_budget_bytes: 600_000 })).toMatchObject({ slots: 1, fits: true })
    expect(plan({ mode: 'host', device_budget_bytes: 10 ** 9 }).slots).toBe(8)
    expect(plan({ mode: 'host', device_budget_bytes: 600_000 }).formulas.join('\n')).toContain('slots = min(experts,')
  })

  it('books bf16 compute’s copies: the dense linear weights’, and one per slot', () => {
    // On cuda (nothing packed): lm_head 2,048 + 2 × (qkv 3,072 + out 1,024) = 10,240 floats of bf16 copies
    // -> B = 20,480 B; a slot keeps the linear weights (all of e here: l = e) only in bf16: 2·e − l/2 = 27,648 B
    const config = RunConfigSchema.parse({
      model: { arch: 'mixtral', vocab_size: 64, d_model: 32, n_layers: 2, n_heads: 4, max_seq_len: 16, d_ff: 48, n_experts: 4, top_k: 2 },
      train: { batch_size: 2, seq_len: 16, backend: 'cuda', compute_dtype: 'bf16' },
      offload: { mode: 'host', expert_slots: 2 },
    })
    const p = planRun(config, { device: BIG, host: BIG, ssd: null })
    expect(tier(p, 'device').total).toBe(FIXED + 20_480 + 2 * (SLOT - E / 2))
    expect(p.formulas.join('\n')).toContain('device = 4·D + B + slots·(2·e − l/2)')
    expect(p.formulas.join('\n')).toContain('l = 4 B × (w_in + w_out) of the largest expert = 18,432 B')
    // Beside a device, the host converts one expert's linear weights at a time before their upload.
    expect(tier(p, 'host')).toMatchObject({ buffers: E / 2, total: 4 * ALL + E / 2 })
    // ⌊(700,000 − 548,736) / 27,648⌋ = 5
    const budgeted = planRun(RunConfigSchema.parse({ ...config, offload: { mode: 'host', device_budget_bytes: 700_000 } }),
      { device: BIG, host: BIG, ssd: null })
    expect(budgeted.slots).toBe(5)
    // With biases the slot's fp32 buffer keeps them: gpt-moe's expert is fc 48·32 + fc.bias 48 + proj 32·48 +
    // proj.bias 32 = 3,152 floats (e = 12,608 B), of which the linear weights are 3,072 (l = 12,288 B).
    const biased = RunConfigSchema.parse({ ...config, model: { ...config.model, arch: 'gpt-moe' } })
    expect(sizesOf(biased)).toMatchObject({ expert: 12_608, slotWeights: 320, expertBf16: 6_144 })
    expect(sizesOf(RunConfigSchema.parse({ ...biased, train: { ...biased.train, compute_dtype: 'fp32' } })))
      .toMatchObject({ expert: 12_608, slotWeights: 12_608, expertBf16: 0 })
  })

  it('books the pending gradients of delayed updates on the host', () => {
    const p = plan({ mode: 'host', expert_slots: 2, optimizer: 'delayed' })
    expect(tier(p, 'host')).toMatchObject({ grads: 2 * ALL, total: 5 * ALL })
  })

  it('names the short device tier: explicit slots, and a budget without room for one slot', () => {
    const slots = plan({ mode: 'host', expert_slots: 2, device_budget_bytes: 600_000 })
    expect(slots.fits).toBe(false)
    expect(slots.explanation).toContain('the device tier is short by 1,984 bytes')
    const budget = plan({ mode: 'host', device_budget_bytes: 550_000 })
    expect(budget).toMatchObject({ fits: false, slots: 0 })
    // 528,256 + 36,864 = 565,120 for one slot
    expect(budget.explanation).toContain('the device tier is short by 15,120 bytes')
    expect(budget.explanation).toContain('at least 565,120 bytes would fit')
  })

  it('names the short host tier', () => {
    const p = plan({ mode: 'host', expert_slots: 2 }, { host: 589_823 })
    expect(p.explanation).toMatch(/^host: does not fit: the host tier is short by 1 bytes/)
  })
})

describe('planner: SSD mode', () => {
  it('books the cache entries on the host and one aligned record per expert on the SSD', () => {
    const p = plan({ mode: 'ssd', expert_slots: 2, host_budget_bytes: 400_000 })
    // ⌊400,000 / 81,920⌋ = 4 entries
    expect(p).toMatchObject({ mode: 'ssd', fits: true, slots: 2, cacheExperts: 4 })
    expect(tier(p, 'host').total).toBe(4 * RECORD)
    expect(tier(p, 'ssd')).toMatchObject({ params: ALL, optimizer: 2 * ALL, buffers: 8 * RECORD - 4 * ALL, total: 655_360 })
    // The cache holds lookahead + 3 entries, so on the cpu backend the experts compute on their cached copies:
    // 528,256 + 2 slots × 18,432 (each the gradient alone)
    expect(tier(p, 'device').total).toBe(565_120)
    expect(p.formulas.join('\n')).toContain('a mapped slot: the gradient alone')
    // Copying into slots (or on a backend that cannot compute in host memory), a slot holds the weights too.
    expect(tier(plan({ mode: 'ssd', expert_slots: 2, host_budget_bytes: 400_000, copy_stream: 'worker' }), 'device').total).toBe(601_984)
  })

  it('maps only where the backend computes in host memory and the cache holds the lookahead window', () => {
    const cuda = plan({ mode: 'ssd', expert_slots: 2, host_budget_bytes: 400_000 }, {}, 'cuda')
    expect(tier(cuda, 'device').total).toBe(601_984)
    expect(plan({ mode: 'ssd', expert_slots: 2, host_budget_bytes: 400_000, copy_stream: 'mapped' }, {}, 'cuda').explanation)
      .toContain('offload.copy_stream "mapped" computes on the experts’ host copies, which the cuda backend cannot')
    const narrow = plan({ mode: 'ssd', expert_slots: 2, cache_experts: 4, lookahead: 2 })
    expect(tier(narrow, 'device').total).toBe(601_984)  // 4 entries < lookahead + 3: copies
    const asked = plan({ mode: 'ssd', expert_slots: 2, cache_experts: 4, lookahead: 2, copy_stream: 'mapped' })
    expect(asked.fits).toBe(false)
    expect(asked.explanation).toContain('offload.cache_experts 4 is below the 5 entries "mapped" holds')
  })

  it('needs max(lookahead + 2, 4) cache entries', () => {
    const short = plan({ mode: 'ssd', expert_slots: 2, host_budget_bytes: 300_000 })
    expect(short.fits).toBe(false)
    expect(short.explanation).toContain('the host tier is short by 27,680 bytes') // 4 × 81,920 = 327,680
    const lookahead = plan({ mode: 'ssd', expert_slots: 2, host_budget_bytes: 400_000, lookahead: 4 })
    expect(lookahead.explanation).toContain('6 cache entries')
    const explicit = plan({ mode: 'ssd', expert_slots: 2, cache_experts: 3 })
    expect(explicit.explanation).toContain('offload.cache_experts 3 is below the 4 entries')
  })

  it('names the short SSD tier', () => {
    const p = plan({ mode: 'ssd', expert_slots: 2, cache_experts: 4 }, { ssd: 600_000 })
    expect(p.explanation).toContain('the ssd tier is short by 55,360 bytes')
    expect(p.explanation).toContain('at least 655,360 bytes would fit')
  })
})

describe('planner: auto', () => {
  it('stays resident when everything fits the device', () => {
    const p = plan({ mode: 'auto' }, { device: RESIDENT })
    expect(p).toMatchObject({ requested: 'auto', mode: 'none', fits: true })
    expect(p.explanation).toMatch(/^auto → none: resident/)
  })

  it('offloads to the host when the device holds at least two slots', () => {
    // ⌊(700,000 − 528,256) / 36,864⌋ = 4 slots
    const p = plan({ mode: 'auto' }, { device: 700_000, host: 10 ** 6 })
    expect(p).toMatchObject({ mode: 'host', fits: true, slots: 4 })
    expect(tier(p, 'device').total).toBe(FIXED + 4 * SLOT)
    expect(p.explanation).toMatch(/^auto → host: resident needs 1\.07 MiB on the device/)
  })

  it('takes the SSD when the host cannot hold every expert but holds the cache', () => {
    // host mode needs 589,824 B; ⌊500,000 / 81,920⌋ = 6 entries = 491,520 B
    const p = plan({ mode: 'auto' }, { device: 700_000, host: 500_000 })
    // the experts compute on their cached copies (6 ≥ lookahead + 3 entries): a slot is its gradient alone
    expect(p).toMatchObject({ mode: 'ssd', fits: true, slots: 8, cacheExperts: 6 })
    expect(tier(p, 'host').total).toBe(491_520)
    expect(p.explanation).toMatch(/^auto → ssd: /)
  })

  it('explains a device too small for the dense state, activations and two slots', () => {
    const p = plan({ mode: 'auto' }, { device: 550_000 })
    expect(p.fits).toBe(false)
    // The SSD tier's slots hold gradients alone (mapped): 528,256 + 2 × 18,432 = 565,120
    expect(p.explanation).toContain('the device tier is short by 15,120 bytes')
    expect(p.explanation).toContain('a device budget of at least 565,120 bytes would fit')
  })

  it('explains a host too small for the SSD cache', () => {
    const p = plan({ mode: 'auto' }, { device: 700_000, host: 300_000 })
    expect(p.explanation).toContain('host mode needs 576.00 KiB on the host')
    expect(p.explanation).toContain('the host tier is short by 27,680 bytes')
    expect(p.explanation).toContain('a host budget of at least 327,680 bytes would fit')
  })

  it('explains an SSD too small for every record', () => {
    const p = plan({ mode: 'auto' }, { device: 700_000, host: 500_000, ssd: 600_000 })
    expect(p.explanation).toContain('the ssd tier is short by 55,360 bytes')
  })

  it('never takes the SSD with delayed updates', () => {
    // host mode with pending gradients: 5 × 147,456 = 737,280
    const p = plan({ mode: 'auto', optimizer: 'delayed' }, { device: 700_000, host: 500_000 })
    expect(p).toMatchObject({ mode: 'host', fits: false })
    expect(p.explanation).toContain('delayed updates are host-tier only')
    expect(p.explanation).toContain('the host tier is short by 237,280 bytes')
  })

  it('takes the config’s budgets before the machine’s', () => {
    const p = plan({ mode: 'auto', device_budget_bytes: 700_000, host_budget_bytes: 10 ** 6 }, { device: BIG, host: 1 })
    expect(p.mode).toBe('host')
    expect(tier(p, 'device').budget).toBe(700_000)
  })
})

describe('planner: the tiny preset', () => {
  it('plans it resident with the fp32 state of every parameter on the device', () => {
    const config = RunConfigSchema.parse(tinyConfig)
    const p = planRun(config, { device: 2 ** 36, host: 2 ** 36, ssd: null })
    expect(p).toMatchObject({ mode: 'none', fits: true, paramCount: 26_355_968 })
    expect(tier(p, 'device').params).toBe(26_355_968 * 4)
  })
})
