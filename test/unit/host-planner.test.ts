// The pre-flight planner: its parameter counts equal the engine's tensor layout for every MoE
// option, and its verdict follows the budget.
import { describe, expect, it } from 'vitest'

import { RunConfigSchema } from '../../main/api/config'
import { loadEngineAddon } from '../../main/host/engine/addon'
import { countParams } from '../../main/host/planner/param-count'
import { planRun } from '../../main/host/planner/plan'
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

describe('planner', () => {
  it.each(Object.entries(variants))('counts the parameters the engine allocates: %s', (_name, model) => {
    const config = RunConfigSchema.parse({ model: { ...base, ...model }, train: { batch_size: 2, seq_len: 16 } })
    const { Engine } = loadEngineAddon()
    const engine = new Engine(JSON.stringify(config))
    expect(countParams(config.model).total).toBe(engine.numParams)
  })

  it('plans the tiny preset resident and explains what would fit when the budget is too small', () => {
    const config = RunConfigSchema.parse(tinyConfig)
    const roomy = planRun(config, { device: 2 ** 36, host: 2 ** 36 })
    expect(roomy).toMatchObject({ mode: 'none', fits: true, paramCount: 26_355_968 })
    const device = roomy.tiers.find((t) => t.tier === 'device')!
    expect(device.params).toBe(26_355_968 * 4)
    expect(device.optimizer).toBe(2 * device.params)
    expect(device.total).toBe(device.params + device.grads + device.optimizer + device.activations + device.buffers)
    const tight = planRun(config, { device: device.total - 1, host: 2 ** 36 })
    expect(tight.fits).toBe(false)
    expect(tight.explanation).toMatch(/needs .* GiB on the device but the budget is/)
  })
})
