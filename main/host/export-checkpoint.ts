// Exports one of our checkpoints as a Hugging Face checkpoint directory (config.json + model.safetensors; a LoRA
// run's adapters merged), or a LoRA run's PEFT adapter directory, through the engine addon. The engine reads our
// checkpoint a tensor at a time from its file (no model is built), so a model larger than memory exports; a Hugging
// Face folder (models.export) is loaded without a trainer, its experts through an SSD-tier file beside the new
// folder, so it converts in bounded memory too. It runs
// on a worker thread, so a large model's export does not block the host's event loop, and it never replaces an
// existing directory. The tokenizer and generation files of the model's folders go with it.
import { existsSync } from 'node:fs'
import { copyFile, readdir, readFile, stat } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import { Worker } from 'node:worker_threads'

import type { ExportFormat } from '../api/contract'
import { HF_MODEL_TYPE_NAMES, type HfExpertLayout, type HfModelType } from '../api/model-families'
import { addonPath } from './engine/addon'

export type { HfModelType }

export interface ExportRequest {
  checkpointDir: string
  outDir: string
  modelType: HfModelType
  bf16: boolean
  /** Absent: the model type's usual expert layout. */
  expertLayout?: HfExpertLayout
  /** Absent: merged (the whole model). adapter: a LoRA run's PEFT adapter, refused by the engine for other runs. */
  format?: ExportFormat
  /** The adapter's base model folder: an adapter export names it (base_model_name_or_path); a PEFT adapter folder
   * as checkpointDir is merged into it (absent: the one its adapter_config.json names). */
  baseDir?: string
  /** Folders whose tokenizer and generation files go with the export (each file from the first that has it), so
   * the folder serves and answers as the model did. */
  companionsFrom?: string[]
}

/** The files beside the weights that a server or transformers reads to tokenize, template and generate. */
export const COMPANION_FILES = [
  'tokenizer.json', 'tokenizer_config.json', 'special_tokens_map.json', 'chat_template.jinja', 'generation_config.json',
  'tokenizer.model', 'vocab.json', 'merges.txt', 'added_tokens.json',
] as const

// Copies each companion file the export does not have from the first folder that has it.
async function copyCompanions(outDir: string, from: readonly string[]): Promise<void> {
  for (const name of COMPANION_FILES) {
    const target = join(outDir, name)
    if (existsSync(target)) continue
    const source = from.map((dir) => join(dir, name)).find((path) => existsSync(path))
    if (source) await copyFile(source, target)
  }
}

// Evaluated as CommonJS in the worker: it needs nothing but the addon, so it works the same from the
// source tree and from the bundle.
const EXPORT_WORKER = `
const { parentPort, workerData: job } = require('node:worker_threads')
try {
  const { exportCheckpoint } = require(job.addonPath)
  exportCheckpoint(job.checkpointDir, job.outDir, job.modelType, job.bf16, job.expertLayout,
    job.format === 'adapter' ? 'adapter' : 'checkpoint', job.baseDir)
  parentPort.postMessage({ ok: true })
} catch (error) {
  parentPort.postMessage({ ok: false, error: error instanceof Error ? error.message : String(error) })
}
`

export async function requireFreshTarget(dir: string): Promise<void> {
  let info
  try {
    info = await stat(dir)
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return
    throw e
  }
  if (!info.isDirectory()) throw new Error(`${dir}: exists and is not a directory; choose a new export directory`)
  if ((await readdir(dir)).length > 0)
    throw new Error(`${dir}: already exists and is not empty; exports never replace a directory, so choose a new one or remove it`)
}

/** A Hugging Face folder's own model_type (config.json), when the engine exports it; else an error naming it. */
export async function folderModelType(dir: string): Promise<HfModelType> {
  const path = join(dir, 'config.json')
  let config: unknown
  try {
    config = JSON.parse(await readFile(path, 'utf8'))
  } catch (error) {
    throw new Error(`${path}: ${error instanceof Error ? error.message : String(error)}`)
  }
  const type = (config as { model_type?: unknown } | null)?.model_type
  if (typeof type !== 'string' || !(HF_MODEL_TYPE_NAMES as readonly string[]).includes(type))
    throw new Error(`${path}: model_type ${JSON.stringify(type)} is not one the engine exports (${HF_MODEL_TYPE_NAMES.join(', ')}); pass modelType`)
  return type as HfModelType
}

export async function exportCheckpoint(request: ExportRequest): Promise<string> {
  const outDir = resolve(request.outDir)
  await requireFreshTarget(outDir)
  const job = { ...request, outDir, addonPath: addonPath() }
  const reply = await new Promise<{ ok: boolean; error?: string }>((resolveReply, reject) => {
    const worker = new Worker(EXPORT_WORKER, { eval: true, workerData: job })
    worker.once('message', resolveReply)
    worker.once('error', reject)
    worker.once('exit', (code) => reject(new Error(`the export worker exited (code ${code}) without an answer`)))
  })
  if (!reply.ok) throw new Error(`export of ${request.checkpointDir} failed: ${reply.error}`)
  if (request.companionsFrom) await copyCompanions(outDir, request.companionsFrom)
  return outDir
}
