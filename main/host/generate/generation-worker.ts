// One generation on a worker thread: a session on the model folder (its weights alone, and under the SSD home
// its experts streamed from the files into the tier) prefills the prompt and steps until a stop token, max tokens
// or the model's last position, posting each token with its experts as it is made, so the host's event loop stays
// free. Cancelling terminates the thread.
import { Worker } from 'node:worker_threads'

import { addonPath } from '../engine/addon'

export interface GenerationJob {
  modelDir: string
  prompt: number[]
  stopTokens: number[]
  maxTokens: number
  /** The session's config (its train section: compute_dtype, threads), JSON. */
  config?: string
  options: {
    temperature: number
    topK: number
    topP: number
    seed: number
    expertHome: 'resident' | 'host' | 'ssd'
    /** The SSD tier's directory (expertHome 'ssd'); absent: the system's temporary directory. */
    ssdDir?: string
    /** modelDir is a PEFT adapter's folder: its base model folder. */
    baseDir?: string
  }
}

export interface GeneratedToken {
  token: number
  position: number
  layers: number[]
  experts: number[][]
}

export type GenerationEnd = { reason: 'stop' | 'max_tokens' | 'length' } | { reason: 'failed'; error: string } | { reason: 'cancelled' }

// Evaluated as CommonJS in the worker: it needs nothing but the addon, so it works the same from the source tree
// and from the bundle.
const WORKER = `
const { parentPort, workerData: job } = require('node:worker_threads')
try {
  const { Generation } = require(job.addonPath)
  const generation = new Generation(job.modelDir, job.options, job.config)
  generation.feed(job.prompt)
  const stop = new Set(job.stopTokens)
  let reason = 'max_tokens'
  for (let i = 0; i < job.maxTokens; i++) {
    const t = generation.step()
    if (t === null) {
      reason = 'length'
      break
    }
    parentPort.postMessage({ kind: 'token', token: t })
    if (stop.has(t.token)) {
      reason = 'stop'
      break
    }
  }
  generation.close()
  parentPort.postMessage({ kind: 'end', reason })
} catch (error) {
  parentPort.postMessage({ kind: 'end', reason: 'failed', error: error instanceof Error ? error.message : String(error) })
}
`

type WorkerMessage = { kind: 'token'; token: GeneratedToken } | { kind: 'end'; reason: 'stop' | 'max_tokens' | 'length' | 'failed'; error?: string }

export interface RunningGeneration {
  cancel(): void
  done: Promise<GenerationEnd>
  /** Resolves once the worker thread has stopped (after done): nothing of the session runs any more. */
  exited: Promise<void>
}

export function runGeneration(job: GenerationJob, onToken: (token: GeneratedToken) => void): RunningGeneration {
  const worker = new Worker(WORKER, { eval: true, workerData: { ...job, addonPath: addonPath() } })
  let settle!: (end: GenerationEnd) => void
  let settled = false
  const done = new Promise<GenerationEnd>((resolve) => {
    settle = (end) => {
      if (settled) return
      settled = true
      resolve(end)
    }
  })
  worker.on('message', (m: WorkerMessage) => {
    if (settled) return
    if (m.kind === 'token') onToken(m.token)
    else settle(m.reason === 'failed' ? { reason: 'failed', error: m.error ?? 'generation failed' } : { reason: m.reason })
  })
  worker.once('error', (e) => settle({ reason: 'failed', error: e.message }))
  const exited = new Promise<void>((resolve) =>
    worker.once('exit', (code) => {
      settle({ reason: 'failed', error: `the generation worker exited (code ${code}) without an answer` })
      resolve()
    }),
  )
  return {
    cancel() {
      settle({ reason: 'cancelled' })
      void worker.terminate()
    },
    done,
    exited,
  }
}
