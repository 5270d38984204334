// `--config C`: a JSON file, or the name of a bundled preset, validated against the run-config
// schema; errors name the file and the field.
import { existsSync, readFileSync } from 'node:fs'
import { basename, extname } from 'node:path'

import { issuesOf } from '../api/contract'
import { RunConfigSchema, type RunConfig } from '../api/config'
import { listPresets } from '../host/catalog'

export interface LoadedConfig {
  config: RunConfig
  /** The preset name or the file's base name, for the default run name. */
  label: string
}

function readJson(file: string): unknown {
  try {
    return JSON.parse(readFileSync(file, 'utf8'))
  } catch (e) {
    throw new Error(`${file}: ${e instanceof SyntaxError ? 'not valid JSON: ' : ''}${(e as Error).message}`)
  }
}

export function loadRunConfig(arg: string, steps?: number): LoadedConfig {
  let raw: unknown
  let label: string
  let source: string
  if (existsSync(arg)) {
    raw = readJson(arg)
    label = basename(arg, extname(arg))
    source = arg
  } else {
    const presets = listPresets()
    const preset = presets.find((p) => p.name === arg)
    if (!preset)
      throw new Error(`--config: "${arg}" is neither a file nor a preset (presets: ${presets.map((p) => p.name).join(', ')})`)
    raw = structuredClone(preset.config)
    label = preset.name
    source = `preset ${preset.name}`
  }
  if (steps !== undefined && typeof raw === 'object' && raw !== null) {
    const train = (raw as { train?: unknown }).train
    ;(raw as { train: unknown }).train = { ...(typeof train === 'object' && train !== null ? train : {}), steps }
  }
  const parsed = RunConfigSchema.safeParse(raw)
  if (!parsed.success)
    throw new Error(`${source}: ${issuesOf(parsed.error).map((i) => `${i.path || '(config)'}: ${i.message}`).join('; ')}`)
  return { config: parsed.data, label }
}
