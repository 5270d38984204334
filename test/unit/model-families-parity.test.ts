// The workbench's mirror of the model families against the engine's own (through moe_model_describe):
// for every preset as it is and rebuilt as every family, and for each family's bare defaults, the engine
// and the TypeScript side must agree on the features, the parameter counts (total, dense, routed experts,
// per expert, by group, padded), the state bytes the planner books, and the effective config. The family
// and Hugging Face model-type lists must be the same lists. Any drift on either side fails here.
import { readFileSync, readdirSync } from 'node:fs'
import { join } from 'node:path'

import { describe, expect, it } from 'vitest'

import { ModelConfigSchema, RunConfigSchema, type RunConfig } from '../../main/api/config'
import { HF_MODEL_TYPES, MODEL_FAMILIES, effectiveModelConfig, modelFamily, modelFeatures } from '../../main/api/model-families'
import { resourcesDir } from '../../main/host/catalog'
import { loadEngineAddon } from '../../main/host/engine/addon'
import { countParams } from '../../main/host/planner/param-count'
import { offloadedDevice, residentDevice, sizesOf } from '../../main/host/planner/tiers'

interface States {
  params: number
  grads: number
  optimizer: number
}

interface EngineDescription {
  config: { model: Record<string, unknown>; train: Record<string, unknown> }
  features: Record<string, unknown>
  params: {
    total: number
    dense: number
    experts: number
    per_expert: number[]
    experts_per_layer: number[]
    padded: { total: number; dense: number; experts: number; per_expert: number[] }
    groups: Record<string, number>
    memory_bytes: { dense: States; experts: States; largest_expert: States }
  }
  families: { name: string; summary: string; features: Record<string, unknown> }[]
  hf_model_types: { model_type: string; label: string; family: string }[]
}

const describeModel = (config: unknown): EngineDescription =>
  JSON.parse(loadEngineAddon().describeModel(JSON.stringify(config))) as EngineDescription

type RawConfig = { model: Record<string, unknown>; train?: Record<string, unknown> }

const presets: [string, RawConfig][] = readdirSync(join(resourcesDir(), 'presets'))
  .filter((f) => f.endsWith('.json'))
  .sort()
  .map((f) => [f.replace(/\.json$/, ''), JSON.parse(readFileSync(join(resourcesDir(), 'presets', f), 'utf8')) as RawConfig])

// A preset's model rebuilt as another family: what that family fixes is dropped, the rest kept.
function asFamily(raw: RawConfig, family: string): RawConfig {
  const model: Record<string, unknown> = { ...raw.model, arch: family }
  const f = modelFamily(family).features
  if (f.attention === 'mha') delete model['n_kv_heads']
  if (f.linear_bias) delete model['qkv_bias']
  if (f.norm !== 'rmsnorm') delete model['qk_norm']
  if (f.position !== 'rope' || f.linear_bias || f.out_bias || f.attention_sinks) {
    delete model['latent_attention']
    delete model['rope_scaling']
    delete model['sliding_window']
    delete model['sliding_layers']
  }
  return { ...raw, model }
}

// The train section as the engine writes it: min_lr defaults to lr / 10; fp32 and the pause policy, the
// defaults, are left out.
function effectiveTrain(t: RunConfig['train']): Record<string, unknown> {
  const { compute_dtype, min_lr, on_nonfinite, ...rest } = t
  return {
    ...rest,
    min_lr: min_lr ?? t.lr * 0.1,
    ...(compute_dtype === 'fp32' ? {} : { compute_dtype }),
    ...(on_nonfinite === 'pause' ? {} : { on_nonfinite }),
  }
}

function expectParity(raw: RawConfig, label: string): void {
  const engine = describeModel(raw)
  const config = RunConfigSchema.parse(raw)
  const m = config.model

  expect(engine.config.model, `${label}: effective model config`).toEqual(effectiveModelConfig(m))
  expect(engine.config.train, `${label}: effective train config`).toEqual(effectiveTrain(config.train))
  expect(engine.features, `${label}: features`).toEqual(modelFeatures(m))

  const counts = countParams(m)
  expect(engine.params.total, `${label}: total parameters`).toBe(counts.total)
  expect(engine.params.dense, `${label}: dense parameters`).toBe(counts.dense)
  expect(engine.params.experts, `${label}: routed expert parameters`).toBe(counts.experts)
  expect(engine.params.per_expert, `${label}: parameters per expert`).toEqual(counts.perExpert)
  expect(engine.params.experts_per_layer, `${label}: experts per layer`).toEqual(counts.expertsPerLayer)
  expect(engine.params.groups, `${label}: parameters by group`).toEqual(counts.groups)
  expect(engine.params.padded, `${label}: padded floats`).toEqual({
    total: counts.padded.total,
    dense: counts.padded.dense,
    experts: counts.padded.experts,
    per_expert: counts.padded.perExpert,
  })

  // What the planner books for the model's state, against the engine's arenas.
  const s = sizesOf(config)
  const mem = engine.params.memory_bytes
  const resident = residentDevice(s, 0)
  expect(resident.params, `${label}: resident weights`).toBe(mem.dense.params + mem.experts.params)
  expect(resident.grads, `${label}: resident gradients`).toBe(mem.dense.grads + mem.experts.grads)
  expect(resident.optimizer, `${label}: resident AdamW moments`).toBe(mem.dense.optimizer + mem.experts.optimizer)
  const offloaded = offloadedDevice(s, 1, 0)
  expect(offloaded.params, `${label}: offloaded weights, one slot`).toBe(mem.dense.params + mem.largest_expert.params)
  expect(offloaded.grads, `${label}: offloaded gradients, one slot`).toBe(mem.dense.grads + mem.largest_expert.grads)
  expect(offloaded.optimizer, `${label}: offloaded dense AdamW moments`).toBe(mem.dense.optimizer)
}

describe('model families: the engine and the workbench agree', () => {
  it('lists the same families with the same default features, and the same Hugging Face model types', () => {
    const engine = describeModel({ model: { arch: MODEL_FAMILIES[0].name } })
    expect(engine.families).toEqual(
      MODEL_FAMILIES.map((f) => ({ name: f.name, summary: f.summary, features: modelFeatures(ModelConfigSchema.parse({ arch: f.name })) })),
    )
    expect(engine.hf_model_types).toEqual(HF_MODEL_TYPES)
  })

  it.each(MODEL_FAMILIES.map((f) => f.name))('%s: bare defaults', (family) => {
    expectParity({ model: { arch: family }, train: {} }, `${family} defaults`)
  })

  it('an out-projection bias added to a family without one (Qwen3-MoE attention_bias)', () => {
    expectParity({ model: { arch: 'mixtral', qkv_bias: true, out_bias: true }, train: {} }, 'mixtral with q/k/v/o biases')
    expectParity({ model: { arch: 'gpt-oss', out_bias: true }, train: {} }, 'gpt-oss, out_bias restated')
  })

  it.each(presets)('preset %s, as it is and as every family', (name, raw) => {
    expect(presets.length).toBeGreaterThan(0)
    expectParity(raw, name)
    for (const family of MODEL_FAMILIES) expectParity(asFamily(raw, family.name), `${name} as ${family.name}`)
  })

  it('rejects what the engine rejects by the family rules, naming the same field', () => {
    expect(() => describeModel({ model: { arch: 'llama' } })).toThrow(/model\.arch.*"gpt-moe", "mixtral"/)
    expect(RunConfigSchema.safeParse({ model: { arch: 'llama' }, train: {} }).success).toBe(false)
    const broken: [Record<string, unknown>, string][] = [
      [{ arch: 'gpt-moe', n_kv_heads: 2 }, 'n_kv_heads'],
      [{ arch: 'gpt-moe', qkv_bias: false }, 'qkv_bias'],
      [{ arch: 'mixtral', d_model: 12, n_heads: 4 }, 'n_heads'],
      [{ arch: 'gpt-moe', qk_norm: 'projection' }, 'qk_norm'],
    ]
    for (const [model, field] of broken) {
      expect(() => describeModel({ model }), field).toThrow(new RegExp(`model\\.${field}`))
      const ts = RunConfigSchema.safeParse({ model, train: {} })
      expect(ts.success, field).toBe(false)
      expect(ts.error?.issues.map((i) => i.path.join('.')), field).toContain(`model.${field}`)
    }
  })
})
