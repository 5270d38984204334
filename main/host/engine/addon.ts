// The native engine addon (native/addon/): its JS surface, and a loader that finds the built binary
// from the package root, wherever this module runs from.
import { existsSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'

import type { HfExpertLayout, HfModelType } from '../../api/model-families'
import { moduleDir, requireHere } from './module-location'
import type { EngineStepRecord } from './step-record'

export type TrainOutcome = 'finished' | 'stopped' | 'failed'

export interface TrainStartOptions {
  /** Stop (as finished) after this step; 0 or absent: the config's train.steps. */
  totalSteps?: number
}

/**
 * One engine (native/engine/include/moe_engine.h). Every synchronous method throws a JS Error with the
 * engine's message (naming the field, file or offset at fault), and is refused while training.
 */
export interface NativeEngine {
  /** Weights from a checkpoint (ours or Hugging Face); the optimizer starts fresh. */
  initFrom(dir: string): void
  /** Weights, optimizer moments, step and data cursor from a checkpoint of this model. */
  resumeFrom(dir: string): void
  saveCheckpoint(dir: string): void
  /** A token shard (native/engine/train/token_data.h), memory-mapped and checked against the vocabulary. */
  setData(path: string): void
  /** The held-out token shard train.eval_every evaluates on. */
  setEvalData(path: string): void
  /** expertLayout: how routed experts are stored; absent: the model type's usual layout (fused for gpt_oss). */
  exportHf(dir: string, modelType: HfModelType, bf16: boolean, expertLayout?: HfExpertLayout,
    format?: 'checkpoint' | 'adapter', baseDir?: string): void
  /**
   * Expert-specialised fine-tuning's measurement (moe_engine_measure_experts): the model's forward over the first
   * `batches` training-shaped windows of a token shard; returns the engine's JSON (per MoE layer the gate and token
   * shares per expert, and the chosen experts by `score` at `threshold`). Synchronous; resident experts only.
   */
  measureExperts(tokenFile: string, options: { batches: number; threshold: number; score: "gate" | "tokens" }): string
  /**
   * Runs the engine's training loop on a native thread until train.steps (or totalSteps), a stop, or an
   * error. onStep gets each step packed as step-record.ts decodes it; the thread blocks when 64 steps wait
   * for JS. The engine saves runDir/checkpoint-<step> every train.checkpoint_every steps and at the end
   * (also after a stop). onNonFinite gets each step whose loss or gradient norm is not finite, with what
   * the engine did (train.on_nonfinite). onDone comes last, once.
   */
  start(
    options: TrainStartOptions,
    onStep: (record: ArrayBuffer) => void,
    onCheckpoint: (step: number, dir: string) => void,
    onDone: (status: TrainOutcome, error?: string) => void,
    onNonFinite?: (step: number, message: string) => void,
  ): void
  /** Takes effect at the next step boundary. */
  pause(): void
  resume(): void
  /** Takes effect at the next step boundary (also while paused); an engine stopped once cannot train again. */
  stop(): void
  /** Saves runDir/checkpoint-<step> at the next step boundary (also while paused). */
  requestCheckpoint(): void
  readonly numParams: number
  readonly stepCount: number
  readonly backendName: string
  /** The backend as its describe() line has it: threads, kernels, and what is wrong with them (more threads than CPUs). */
  readonly backendDescription: string
  /** The effective config, defaults filled in. */
  readonly configJson: string
  readonly training: boolean
}

/** Where routed experts live while generating (moe_generate_options.expert_home). */
export type GenerationExpertHome = 'resident' | 'host' | 'ssd'

export interface GenerationOptions {
  temperature?: number
  topK?: number
  topP?: number
  seed?: number
  expertHome?: GenerationExpertHome
  /** Device slots caching the last used experts (default 2 x top_k), and the SSD tier's host cache entries. */
  expertSlots?: number
  cacheExperts?: number
  ssdDir?: string
  /** A session on a PEFT adapter's folder: its base model folder (absent: its adapter_config.json's
   * base_model_name_or_path). */
  baseDir?: string
}

/** A generation session on an engine (moe_generation_*); its steps run on the calling thread. */
export interface NativeGeneration {
  /** Appends tokens at the next positions (the prompt). */
  feed(tokens: readonly number[] | Int32Array): void
  /** The next token and, per MoE layer (layers: their model layers), the experts of the position it was sampled from; null at the model's max_seq_len. */
  step(): { token: number; position: number; layers: number[]; experts: number[][] } | null
  reset(): void
  close(): void
  expertStats(): { misses: number; hits: number; bytesUploaded: number }
  readonly position: number
}

export interface EngineAddon {
  /**
   * A generation session on an engine's model, or on a model folder (ours, Hugging Face or a PEFT adapter's;
   * moe_generation_open) with no engine: only its weights are built, and under expertHome 'ssd' each routed expert
   * goes from the files straight into the SSD tier, so a model larger than memory can be talked to. configJson
   * (folder only) picks the backend, compute dtype, threads and seed with its train section.
   */
  Generation: {
    new (engine: NativeEngine, options?: GenerationOptions): NativeGeneration
    new (modelDir: string, options?: GenerationOptions, configJson?: string): NativeGeneration
  }
  /**
   * runDir: the run's directory, where start() writes checkpoints and the SSD tier its expert file (runDir/ssd
   * unless the config's offload.ssd_dir names one).
   */
  /**
   * load: a folder the engine loads as it opens (as initFrom, or resumeFrom with resume), its weights never drawn
   * from the seed first: a large model's start-up does not pay for weights the load overwrites.
   */
  Engine: new (configJson: string, initDir?: string, runDir?: string, load?: { dir: string; resume?: boolean }) => NativeEngine
  /** The native packing of a step record (for testing the TS decoder against it). */
  packStepRecord(record: Omit<EngineStepRecord, 'expertTokens'> & { expertTokens: readonly ArrayLike<number>[] }): ArrayBuffer
  /**
   * The engine's view of a run config without creating an engine (moe_model_describe): JSON with the effective
   * config, the model's features, its parameter counts and state bytes, the families and the HF model types.
   * Throws with the engine's message (naming the field) for an invalid config.
   */
  describeModel(configJson: string): string
  /**
   * A Hugging Face model folder as the engine's import sees it, from config.json and the safetensors headers
   * only (moe_hf_inspect's JSON). Throws when the folder is not a model folder at all.
   */
  inspectHf(dir: string): string
  /**
   * A checkpoint directory exported as exportHf would export the model loaded from it, without an engine
   * (moe_export_checkpoint): ours is read a tensor at a time from its file, so a model larger than memory exports;
   * a Hugging Face folder is loaded with its experts in an SSD-tier file beside outDir. Synchronous; throws with the engine's message.
   * baseDir: the adapter's base model folder, which an adapter export names in its adapter_config.json and into
   * which a PEFT adapter folder given as checkpointDir is merged (absent: the base its adapter_config.json names).
   */
  exportCheckpoint(checkpointDir: string, outDir: string, modelType: HfModelType, bf16: boolean,
    expertLayout?: HfExpertLayout, format?: 'checkpoint' | 'adapter', baseDir?: string): void
  /**
   * The backends built into the engine (moe_engine_list_backends' JSON): name, description, usable, why_not,
   * validation, and the kernels a usable one picks on this machine, with whether its bf16 compute runs on bf16 units.
   */
  listBackends(): string
  apiVersion: number
}

export const PACKAGE_NAME = 'moe-workbench'
export const ADDON_PATH = join('native', 'build-addon', 'Release', 'moe_engine_addon.node')

function isPackageRoot(dir: string): boolean {
  try {
    return (JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name?: unknown }).name === PACKAGE_NAME
  } catch {
    return false
  }
}

/** The nearest directory at or above `from` whose package.json is ours. */
export function findPackageRoot(from: string): string | null {
  for (let dir = from; ; dir = dirname(dir)) {
    if (isPackageRoot(dir)) return dir
    if (dirname(dir) === dir) return null
  }
}

export function addonPath(from: string = moduleDir()): string {
  const root = findPackageRoot(from)
  if (!root) throw new Error(`cannot find the ${PACKAGE_NAME} package root above ${from}`)
  return join(root, ADDON_PATH)
}

let loaded: EngineAddon | undefined

export function loadEngineAddon(): EngineAddon {
  if (loaded) return loaded
  const path = addonPath()
  if (!existsSync(path)) {
    const root = dirname(dirname(dirname(dirname(path))))
    throw new Error(`the native engine is not built (${path} is missing): run \`npm install\` (or \`npm rebuild\`) in ${root}`)
  }
  loaded = requireHere()(path) as EngineAddon
  return loaded
}
