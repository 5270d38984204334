// The bundled presets (resources/presets/*.json), each validated against the run-config schema so a
// broken preset fails loudly, with the field's path, rather than reaching the engine.
import { readdirSync, readFileSync } from 'node:fs'
import { basename, join } from 'node:path'

import type { z } from 'zod'

import { issuesOf, type PresetSchema } from '../../api/contract'
import { RunConfigSchema } from '../../api/config'
import { resourcesDir } from './resources-dir'

export type Preset = z.output<typeof PresetSchema>

// One line each, from the presets table in resources/README.md.
const DESCRIPTIONS: Record<string, string> = {
  tiny: 'Demo: mixtral L4 d256, 8 SwiGLU experts top-2, byte vocab; trains in minutes on two CPU cores',
  'moe-s': 'ES-MoE MoE-S: gpt-moe L12 d768, 8 experts of 3072, top-1, vocab 51,200',
  'moe-m': 'ES-MoE MoE-M: gpt-moe L24 d1024, 8 experts of 4096, top-1, vocab 51,200',
  'moe-l': 'ES-MoE MoE-L: gpt-moe L24 d1536, 8 experts of 6144, top-1, vocab 51,200',
  'moe-xl': 'ES-MoE MoE-XL: gpt-moe L24 d1536, 8 experts of 8192, top-1, vocab 51,200',
  'mixtral-8x7b': 'Mixtral 8x7B shape: L32 d4096, GQA 32/8, 8 experts of 14,336, top-2; needs offload',
  'olmoe-1b-7b': 'OLMoE-1B-7B: L16 d2048, 64 experts of 1024, top-8, no renormalisation, q/k norm over the projection, z-loss 0.001',
  'qwen3-30b-a3b': 'Qwen3-30B-A3B: L48 d2048, GQA 32/4 of head 128, 128 experts of 768, top-8 renormalised, per-head q/k norm; needs offload',
  'qwen-moe-a2.7b': 'Qwen1.5-MoE-A2.7B-like: L24 d2048, 60 experts of 1408, top-4, gated shared expert, qkv bias',
  'deepseek-v2-lite': 'DeepSeek-V2-Lite: L27 d2048, latent attention (kv rank 512, YaRN ×40), 64 experts of 1408 top-6, 2 shared, first layer dense',
  'gpt-oss-20b': 'gpt-oss-20b: L24 d2880, GQA 64/8 (head 64), sinks, window 128 on alternate layers, 32 clamped-SwiGLU '
    + 'experts of 2880, top-4, vocab 201,088; YaRN ×32 over 4096 positions; needs offload',
}

// Small presets first, so the list reads from "try it now" to "needs offload".
const ORDER = ['tiny', 'moe-s', 'moe-m', 'moe-l', 'moe-xl', 'olmoe-1b-7b', 'qwen-moe-a2.7b', 'qwen3-30b-a3b', 'deepseek-v2-lite',
  'gpt-oss-20b', 'mixtral-8x7b']

export function loadPreset(file: string): Preset {
  const name = basename(file, '.json')
  let raw: unknown
  try {
    raw = JSON.parse(readFileSync(file, 'utf8'))
  } catch (e) {
    throw new Error(`${file}: not valid JSON: ${(e as Error).message}`)
  }
  const parsed = RunConfigSchema.safeParse(raw)
  if (!parsed.success)
    throw new Error(`${file}: ${issuesOf(parsed.error).map((i) => `${i.path}: ${i.message}`).join('; ')}`)
  return { name, description: DESCRIPTIONS[name] ?? `Preset ${name}`, config: parsed.data }
}

export function listPresets(dir = join(resourcesDir(), 'presets')): Preset[] {
  const rank = (name: string) => (ORDER.includes(name) ? ORDER.indexOf(name) : ORDER.length)
  return readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .map((f) => loadPreset(join(dir, f)))
    .sort((a, b) => rank(a.name) - rank(b.name) || a.name.localeCompare(b.name))
}

export function findPreset(name: string): Preset | undefined {
  return listPresets().find((p) => p.name === name)
}
