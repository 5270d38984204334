// A PEFT adapter's folder (adapter_config.json beside adapter_model.safetensors) answers and exports on its base
// model: the folder given, else the one its adapter_config.json names as base_model_name_or_path. The engine makes
// the same choice; the host makes it first so that a missing base is named before a worker starts, and so that
// the base's tokenizer and model_type serve an adapter folder that has none of its own.
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'

/** Whether dir is an adapter folder to be put on a base: it has adapter_config.json and, unless a base is given,
 * no config.json of its own (one of our runs' exports of a randomly initialised model carries its config). */
export function onBase(dir: string, base?: string): boolean {
  return existsSync(join(dir, 'adapter_config.json')) && (base !== undefined || !existsSync(join(dir, 'config.json')))
}

/** The base model folder of the adapter folder dir: `base` when given, else its adapter_config.json's
 * base_model_name_or_path; an error naming the file and field when that is no model folder here. */
export function adapterBase(dir: string, base?: string): string {
  const path = join(dir, 'adapter_config.json')
  let named = base
  if (named === undefined) {
    let config: unknown
    try {
      config = JSON.parse(readFileSync(path, 'utf8'))
    } catch (error) {
      throw new Error(`${path}: ${error instanceof Error ? error.message : String(error)}`)
    }
    const field = (config as { base_model_name_or_path?: unknown } | null)?.base_model_name_or_path
    if (typeof field !== 'string' || field === '')
      throw new Error(`${path}: base_model_name_or_path names no base model; choose the base model folder the adapter was trained on`)
    named = field
  }
  if (!existsSync(join(named, 'config.json')))
    throw new Error(base === undefined
      ? `${path}: base_model_name_or_path "${named}" is not a model folder here (no config.json); choose the base model folder the adapter was trained on`
      : `${named}: no config.json; the base of an adapter is a Hugging Face model folder or one of our checkpoints`)
  return named
}
