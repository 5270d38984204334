// models.inspect: a Hugging Face folder read as the engine's import reads it (moe_hf_inspect: config.json and
// the safetensors headers, no weights), with the parameter counts of the planner and the tokenizer files found. A
// PEFT adapter folder gets its base's card and what the adapter is (rank, alpha, adapted modules).
import { closeSync, existsSync, openSync, readFileSync, readSync, statSync } from 'node:fs'
import { join, resolve } from 'node:path'

import { ModelConfigSchema, type ModelConfig } from '../../api/config'
import type { ModelCard } from '../../api/model-card'
import { loadEngineAddon } from '../engine/addon'
import { countParams } from '../planner/param-count'
import { adapterBase, onBase } from './adapter-folder'

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

// rank and alpha from adapter_config.json, and the adapted modules from the safetensors header (its lora_A keys).
function adapterFacts(dir: string): { rank: number; alpha: number; modules: number } {
  const configPath = join(dir, 'adapter_config.json')
  const config = JSON.parse(readFileSync(configPath, 'utf8')) as { r?: unknown; lora_alpha?: unknown }
  if (typeof config.r !== 'number' || typeof config.lora_alpha !== 'number')
    throw new Error(`${configPath}: r and lora_alpha must be numbers`)
  const file = join(dir, 'adapter_model.safetensors')
  let keys: string[]
  try {
    const fd = openSync(file, 'r')
    try {
      const head = Buffer.alloc(8)
      readSync(fd, head, 0, 8, 0)
      const length = Number(head.readBigUInt64LE(0))
      if (length > 100 << 20) throw new Error(`a header of ${length} bytes`)
      const json = Buffer.alloc(length)
      readSync(fd, json, 0, length, 8)
      keys = Object.keys(JSON.parse(json.toString('utf8')) as object)
    } finally {
      closeSync(fd)
    }
  } catch (error) {
    throw new Error(`${file}: ${error instanceof Error ? error.message : String(error)}`)
  }
  return { rank: config.r, alpha: config.lora_alpha, modules: keys.filter((k) => k.endsWith('.lora_A.weight')).length }
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
  // A PEFT adapter folder: its base's card, with what the adapter is.
  if (onBase(dir)) {
    const base = adapterBase(dir)
    const card = inspectModel(base)
    return { ...card, dir, adapter: { base, ...adapterFacts(dir) } }
  }
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
