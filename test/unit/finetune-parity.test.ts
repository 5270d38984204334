// The workbench's count of what a fine-tune trains against the engine's own (moe_model_describe's "finetune"
// section): for every preset and method (full, LoRA with each target set, ESFT with a hand-made expert set
// trained fully or with LoRA, the router trained or frozen), the trainable, frozen and adapter parameters, the
// parameters per group, and the bytes of the trained parameters' state and of the frozen base must be the same.
import { readFileSync, readdirSync } from 'node:fs'
import { join } from 'node:path'

import { describe, expect, it } from 'vitest'

import { RunConfigSchema, type RunConfig } from '../../main/api/config'
import { LORA_TARGETS, resolveFinetune } from '../../main/api/finetune'
import { moeLayerIndexes } from '../../main/api/model-families'
import { resourcesDir } from '../../main/host/catalog'
import { loadEngineAddon } from '../../main/host/engine/addon'
import { finetuneCounts, finetuneStateBytes, tensorTrains } from '../../main/host/planner/finetune-plan'
import { layoutTensors } from '../../main/host/planner/layout-tensors'

interface EngineFinetune {
  trainable_params: number
  frozen_params: number
  adapter_params: number
  trainable_state_bytes: number
  frozen_bytes: number
  groups: Record<string, { trainable: number; frozen: number }>
}

const describeFinetune = (config: RunConfig): EngineFinetune => {
  const d = JSON.parse(loadEngineAddon().describeModel(JSON.stringify(config))) as { finetune?: EngineFinetune }
  if (!d.finetune) throw new Error(`the engine described no finetune section: ${JSON.stringify(d).slice(0, 200)}`)
  return d.finetune
}

const presets: [string, { model: unknown; train?: unknown }][] = readdirSync(join(resourcesDir(), 'presets'))
  .filter((f) => f.endsWith('.json'))
  .sort()
  .map((f) => [f.replace(/\.json$/, ''), JSON.parse(readFileSync(join(resourcesDir(), 'presets', f), 'utf8'))])

// The methods for one model: every LoRA target alone and all together (latent attention's projections included).
function methods(config: RunConfig): [string, unknown][] {
  const m = config.model
  const targets = [...LORA_TARGETS]
  const layers = moeLayerIndexes(m)
  const expertsOf = (i: number) => (Array.isArray(m.n_experts) ? m.n_experts[i]! : m.n_experts)
  // A hand-made set: the first and last expert of every other MoE layer (the rest train all of theirs).
  const experts = Object.fromEntries(layers.filter((_, i) => i % 2 === 0).map((l, i) => [String(l), [0, expertsOf(i * 2) - 1]]))
  const lora = (ts: string[], extra: object = {}) => ({ method: 'lora', lora: { rank: 4, alpha: 8, targets: ts }, ...extra })
  return [
    ['full', { method: 'full' }],
    ['full, router frozen', { method: 'full', train: ['embeddings', 'attention', 'norms', 'experts', 'shared_experts', 'dense_mlp', 'lm_head'] }],
    ...targets.map((t): [string, unknown] => [`lora ${t}`, lora([t])]),
    ['lora, every target', lora(targets)],
    ['lora, router trained', lora(targets, { train: ['router'] })],
    ['esft full', { method: 'esft', experts }],
    ['esft full + router', { method: 'esft', experts, train: ['experts', 'router'] }],
    ['esft lora', { method: 'esft', experts, esft: { with: 'lora' }, lora: { rank: 2, alpha: 4, rslora: true } }],
  ]
}

describe('fine-tune counts: the engine and the workbench agree', () => {
  it.each(presets)('preset %s, every method', (_, raw) => {
    const base = RunConfigSchema.parse({ ...raw, offload: undefined, placement: undefined, pipeline: undefined })
    for (const [name, finetune] of methods(base)) {
      const config = RunConfigSchema.parse({ ...base, finetune })
      const engine = describeFinetune(config)
      const counts = finetuneCounts(config)
      const bytes = finetuneStateBytes(config)
      const ours = {
        trainable_params: counts.trainable, frozen_params: counts.frozen, adapter_params: counts.adapters,
        trainable_state_bytes: bytes.trainedState, frozen_bytes: bytes.frozen,
      }
      const theirs = {
        trainable_params: engine.trainable_params, frozen_params: engine.frozen_params, adapter_params: engine.adapter_params,
        trainable_state_bytes: engine.trainable_state_bytes, frozen_bytes: engine.frozen_bytes,
      }
      expect(ours, name).toEqual(theirs)
      // Per group (base tensors; the engine's "lora" group is the adapters, "none" the selection bias).
      const f = resolveFinetune(config.finetune)
      const groups: Record<string, { trainable: number; frozen: number }> = {}
      const experts = new Map<number, number>()
      for (const t of layoutTensors(config.model)) if (t.expert !== null) experts.set(t.layer!, Math.max(experts.get(t.layer!) ?? 0, t.expert + 1))
      for (const t of layoutTensors(config.model)) {
        const g = (groups[t.group ?? 'none'] ??= { trainable: 0, frozen: 0 })
        if (tensorTrains(t, f, (l) => experts.get(l)!)) g.trainable += t.numel
        else g.frozen += t.numel
      }
      const engineGroups = Object.fromEntries(Object.entries(engine.groups).filter(([g]) => g !== 'lora'))
      expect(groups, name).toEqual(engineGroups)
      expect(engine.groups['lora']?.trainable ?? 0, name).toBe(counts.adapters)
    }
  })
})
