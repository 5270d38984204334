// Expert-specialised fine-tuning's measurement for the workbench: the dataset prepared as a token shard (the same
// cache a run uses), then the engine's forward over its first batches on a worker thread (the host's event loop
// stays free), returning each expert's shares and the chosen set (moe_engine_measure_experts).
import { Worker } from 'node:worker_threads'

import type { RunConfig } from '../api/config'
import type { ExpertShares, ParsedParams } from '../api/contract'
import { resolveFinetune } from '../api/finetune'
import type { DatasetSpec, PrepareOptions, PreparedDataset } from './datasets/prepare'
import { addonPath } from './engine/addon'

export interface MeasureJob {
  configJson: string
  init: string | null
  tokenFile: string
  batches: number
  threshold: number
  score: 'gate' | 'tokens'
}

// Evaluated as CommonJS in the worker: it needs nothing but the addon.
const MEASURE_WORKER = `
const { parentPort, workerData: job } = require('node:worker_threads')
try {
  const { Engine } = require(job.addonPath)
  const engine = job.init ? new Engine(job.configJson, job.init, undefined, { dir: job.init }) : new Engine(job.configJson)
  const json = engine.measureExperts(job.tokenFile, { batches: job.batches, threshold: job.threshold, score: job.score })
  parentPort.postMessage({ ok: true, json })
} catch (error) {
  parentPort.postMessage({ ok: false, error: error instanceof Error ? error.message : String(error) })
}
`

/** The engine's JSON (snake_case) as the API's ExpertShares. */
export function expertSharesFromEngine(json: string): ExpertShares {
  const e = JSON.parse(json) as {
    layers: number[]; gate: number[][]; tokens: number[][]; batches: number; tokens_seen: number
    threshold: number; score: 'gate' | 'tokens'; experts: Record<string, number[]>
  }
  return {
    layers: e.layers, gate: e.gate, tokens: e.tokens, batches: e.batches, tokensSeen: e.tokens_seen,
    threshold: e.threshold, score: e.score, experts: e.experts,
  }
}

/** What the request leaves out, from the config's finetune.esft, else the contract's defaults. */
export function measureJob(params: ParsedParams<'finetune.measureExperts'>, tokenFile: string): MeasureJob {
  const esft = resolveFinetune(params.config.finetune)?.esft
  // Only the model and the batch shape matter; the engine gets nothing else (no offload: experts stay resident).
  const config: Pick<RunConfig, 'model' | 'train'> = { model: params.config.model, train: params.config.train }
  return {
    configJson: JSON.stringify(config),
    init: params.init ?? null,
    tokenFile,
    batches: params.batches ?? esft?.sample_batches ?? 32,
    threshold: params.threshold ?? esft?.threshold ?? 0.9,
    score: params.score ?? esft?.score ?? 'gate',
  }
}

export type RunMeasure = (job: MeasureJob) => Promise<string>

export const runMeasureWorker: RunMeasure = async (job) => {
  const reply = await new Promise<{ ok: boolean; json?: string; error?: string }>((resolveReply, reject) => {
    const worker = new Worker(MEASURE_WORKER, { eval: true, workerData: { ...job, addonPath: addonPath() } })
    worker.once('message', resolveReply)
    worker.once('error', reject)
    worker.once('exit', (code) => reject(new Error(`the measurement worker exited (code ${code}) without an answer`)))
  })
  if (!reply.ok) throw new Error(`measuring the experts failed: ${reply.error}`)
  return reply.json!
}

export interface MeasureDeps {
  prepare: (spec: DatasetSpec, cacheDir: string, options?: PrepareOptions) => Promise<PreparedDataset>
  cacheDir: string
  run?: RunMeasure
}

export async function measureExperts(params: ParsedParams<'finetune.measureExperts'>, deps: MeasureDeps): Promise<ExpertShares> {
  const data = await deps.prepare(params.dataset, deps.cacheDir, { seqLen: params.config.train.seq_len })
  return expertSharesFromEngine(await (deps.run ?? runMeasureWorker)(measureJob(params, data.path)))
}
