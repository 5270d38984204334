// models.inspect: a Hugging Face folder read as the engine's import reads it (moe_hf_inspect: config.json and
// the safetensors headers, no weights), with the parameter counts of the planner and the tokenizer files found.
import { existsSync, readFileSync, statSync } from 'node:fs'
import { join, resolve } from 'node:path'

import { ModelConfigSchema, type ModelConfig } from '../../api/config'
import type { ModelCard } from '../../api/model-card'
import { loadEngineAddon } from '../engine/addon'
import { countParams } from '../planner/param-count'

interface EngineInspection {
  model_type: string
  label?: string
  architecture?: string
  config?: unknown
  weights: { format: 'single' | 'sharded' | 'none'; complete: boolean; shards: { file: string; present: boolean; tensors?: number }[] }
  dtypes?: Record<string, number>
  tensors?: number
  bytes?: number
  expected_tensors?: number
  expert_layout?: string
  problems: string[]
  notes: string[]
  supported: boolean
}

function shapeOf(m: ModelConfig): NonNullable<ModelCard['shape']> {
  const counts = countParams(m)
  const moeLayers = counts.expertsPerLayer.length
  const active = counts.dense + counts.perExpert.reduce((sum, per) => sum + m.top_k * per, 0)
  return {
    layers: m.n_layers,
    moeLayers,
    expertsPerLayer: counts.expertsPerLayer[0] ?? 0,
    topK: m.top_k,
    sharedExpert: m.shared_expert_d_ff > 0,
    totalParams: counts.total,
    activeParams: active,
  }
}

function chatTemplateOf(dir: string): ModelCard['tokenizer']['chatTemplate'] {
  if (existsSync(join(dir, 'chat_template.jinja'))) return 'chat_template.jinja'
  const config = join(dir, 'tokenizer_config.json')
  if (!existsSync(config)) return null
  try {
    const parsed = JSON.parse(readFileSync(config, 'utf8')) as { chat_template?: unknown }
    return parsed.chat_template ? 'tokenizer_config.json' : null
  } catch {
    return null
  }
}

export function inspectModel(folder: string): ModelCard {
  const dir = resolve(folder)
  if (!existsSync(dir) || !statSync(dir).isDirectory()) throw new Error(`${dir}: not a folder; pick a Hugging Face model folder`)
  const e = JSON.parse(loadEngineAddon().inspectHf(dir)) as EngineInspection
  const problems = [...e.problems]
  let model: ModelConfig | null = null
  if (e.config !== undefined) {
    const parsed = ModelConfigSchema.safeParse(e.config)
    if (parsed.success) model = parsed.data
    else problems.push(`${join(dir, 'config.json')}: the converted model config does not validate: ${parsed.error.issues[0]?.message ?? ''}`)
  }
  return {
    dir,
    modelType: e.model_type,
    label: e.label ?? null,
    architecture: e.architecture ?? null,
    supported: e.supported && model !== null,
    problems,
    notes: e.notes,
    model,
    shape: model ? shapeOf(model) : null,
    weights: {
      ...e.weights,
      dtypes: e.dtypes ?? {},
      bytes: e.bytes ?? null,
      tensors: e.tensors ?? null,
      expectedTensors: e.expected_tensors ?? null,
      expertLayout: e.expert_layout ?? null,
    },
    tokenizer: {
      tokenizerJson: existsSync(join(dir, 'tokenizer.json')),
      tokenizerConfig: existsSync(join(dir, 'tokenizer_config.json')),
      chatTemplate: chatTemplateOf(dir),
    },
  }
}
