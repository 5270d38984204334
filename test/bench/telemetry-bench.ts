// Telemetry store benchmark, run by test/bench/telemetry (bundled to one .mjs first, since plain Node
// cannot load TypeScript). Modes:
//   writer DIR TINY_STEP_MS   the benchmark: append throughput, read latency, a concurrent reader
//   reader DB RUN             the concurrent reader (a child process of the writer)
// Prints a table and, last, `BENCH telemetry steps_per_s=N overhead_pct=P`.
import { fork } from 'node:child_process'
import { join } from 'node:path'

import { RunConfigSchema } from '../../main/api/config'
import { EXPERT_TIER, TelemetryStore, type StepTelemetry } from '../../main/host/store/store'
import { placementOf } from './synthetic-placement'

const LAYERS = 16
const EXPERTS = 64
const DEVICES = 4
const TOP_K = 2
const TOKENS = 8 * 1024
const STEPS = 2000
const SLICE = 1000
const RUN = 'bench'

// Deterministic pseudo-random numbers, so every run writes the same data.
function lcg(seed: number): () => number {
  let s = seed >>> 0
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32)
}

// A record as a 16-layer x 64-expert offloading run produces it: every scalar column and every blob.
function realisticRecords(first: number, count: number): StepTelemetry[] {
  const next = lcg(first)
  const perLayer = (f: (e: number) => number) => Array.from({ length: LAYERS }, () => Int32Array.from({ length: EXPERTS }, (_, e) => f(e)))
  return Array.from({ length: count }, (_, i) => {
    const expertTokens = perLayer(() => Math.floor(((TOKENS * TOP_K) / EXPERTS) * (0.2 + 1.6 * next())))
    return {
      step: first + i,
      loss: 4 + next(),
      aux_loss: 0.01 + next() / 100,
      lr: 3e-4,
      grad_norm: 0.5 + next(),
      tokens: TOKENS,
      step_ms: 900 + next() * 100,
      forward_ms: 300,
      backward_ms: 500,
      optimizer_ms: 90,
      eval_loss: NaN,
      upload_ms: 120,
      upload_hidden_ms: 110,
      stall_ms: 10 * next(),
      ssd_ms: 40,
      bytes_h2d: 3e9,
      bytes_d2h: 1.5e9,
      bytes_ssd_read: 2e9,
      bytes_ssd_write: 1e9,
      cache_hits: Math.floor(next() * 1000),
      cache_misses: Math.floor(next() * 100),
      peak_device_bytes: 70e9,
      peak_host_bytes: 200e9,
      peak_ssd_bytes: 900e9,
      expertTokens,
      placement: placementOf(expertTokens, DEVICES, (_, e) => (e + Math.floor(next() * 2)) % DEVICES),
      tiers: perLayer(() => [EXPERT_TIER.device, EXPERT_TIER.host, EXPERT_TIER.ssd][Math.floor(next() * 3)]),
      pins: perLayer(() => (next() < 0.25 ? 1 : 0)),
      spilledTokens: perLayer(() => (next() < 0.1 ? Math.floor(next() * 512) : 0)),
    }
  })
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
const quantile = (xs: number[], q: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))]
const fmt = (x: number, digits = 3) => x.toFixed(digits)

/** Appends records one step per transaction; returns each append's duration in ms. */
function appendTimed(store: TelemetryStore, records: StepTelemetry[]): number[] {
  return records.map((r) => {
    const t0 = performance.now()
    store.appendSteps(RUN, [r], [Date.now()])
    return performance.now() - t0
  })
}

function timeReads(n: number, read: () => unknown): number[] {
  return Array.from({ length: n }, () => {
    const t0 = performance.now()
    read()
    return performance.now() - t0
  })
}

async function writer(dir: string, tinyStepMs: number): Promise<void> {
  const dbPath = join(dir, 'telemetry.sqlite')
  const store = TelemetryStore.open(dbPath)
  const config = RunConfigSchema.parse({
    model: { arch: 'mixtral', n_layers: LAYERS, n_experts: EXPERTS, top_k: TOP_K },
    train: { steps: 2 * STEPS },
  })
  store.insertRun({
    id: RUN, name: 'bench', status: 'running', config, dataset: { path: 'corpus.txt' }, init: null, offload: null, runDir: dir,
    createdAt: Date.now(), startedAt: Date.now(), finishedAt: null, step: 0, totalSteps: 2 * STEPS,
    lastLoss: null, tokensPerSec: null, error: null,
  })
  console.log(`driver ${store.driver}; file DB in WAL mode at ${dbPath}`)
  console.log(`records: ${LAYERS} MoE layers x ${EXPERTS} experts; all scalar columns; tokens, placement, tiers, pins, spilled blobs; placement rows per layer`)

  // Warm-up (statement preparation, JIT) on steps that are then truncated away.
  appendTimed(store, realisticRecords(1, 50))
  store.truncateSteps(RUN, 0)

  const records = realisticRecords(1, STEPS)
  const t0 = performance.now()
  const perStep = appendTimed(store, records)
  const seconds = (performance.now() - t0) / 1000
  const stepsPerSec = STEPS / seconds
  const meanMs = (seconds * 1000) / STEPS
  // Each step writes a steps row and an expert_loads row and updates the run row.
  console.log('\n== append, one transaction per step ==')
  console.log(`steps         ${STEPS}`)
  console.log(`steps/s       ${fmt(stepsPerSec, 0)}`)
  console.log(`rows/s        ${fmt(stepsPerSec * 3, 0)} (steps + expert_loads inserts, runs update)`)
  console.log(`per step ms   mean ${fmt(meanMs)}  p50 ${fmt(median(perStep))}  p99 ${fmt(quantile(perStep, 0.99))}`)

  console.log('\n== reads ==')
  const slice = timeReads(20, () => store.expertLoad(RUN, 7, { fromStep: 501, toStep: 500 + SLICE, maxSteps: 2000 }))
  const bucketed = timeReads(20, () => store.expertLoad(RUN, 7, { maxSteps: 200 }))
  const series = timeReads(20, () => store.series(RUN, ['loss', 'grad_norm', 'step_ms', 'tokens_per_s'], { maxPoints: 2000 }))
  console.log(`expertLoad ${SLICE}-step slice of one layer (${SLICE} x ${EXPERTS})     median ${fmt(median(slice))} ms`)
  console.log(`expertLoad all ${STEPS} steps into 200 buckets              median ${fmt(median(bucketed))} ms`)
  console.log(`series 4 metrics over ${STEPS} steps, maxPoints 2000        median ${fmt(median(series))} ms`)

  console.log('\n== concurrent: a reader process queries while this process appends ==')
  const reader = fork(process.argv[1], ['reader', dbPath, RUN], { stdio: ['ignore', 'pipe', 'inherit', 'ipc'] })
  let readerOut = ''
  reader.stdout?.on('data', (d: Buffer) => (readerOut += d))
  await new Promise<void>((resolve) => reader.once('message', () => resolve()))
  const more = realisticRecords(STEPS + 1, STEPS)
  const t1 = performance.now()
  const concurrentPerStep = appendTimed(store, more)
  const concurrentStepsPerSec = STEPS / ((performance.now() - t1) / 1000)
  reader.send('stop')
  await new Promise((resolve) => reader.once('exit', resolve))
  const r = JSON.parse(readerOut) as { queries: number; seconds: number; p50: number; p99: number; minSteps: number; maxSteps: number }
  console.log(`writer steps/s ${fmt(concurrentStepsPerSec, 0)}  per step p50 ${fmt(median(concurrentPerStep))} ms  p99 ${fmt(quantile(concurrentPerStep, 0.99))} ms`)
  console.log(`reader: ${r.queries} series+expertLoad queries in ${fmt(r.seconds, 2)} s, p50 ${fmt(r.p50)} ms, p99 ${fmt(r.p99)} ms; saw ${r.minSteps}..${r.maxSteps} steps`)
  store.close()

  console.log('\n== overhead against the engine ==')
  const overhead = Number.isFinite(tinyStepMs) ? (meanMs / tinyStepMs) * 100 : NaN
  console.log(`tiny preset step ${Number.isFinite(tinyStepMs) ? fmt(tinyStepMs, 1) : 'NA'} ms; telemetry ${fmt(meanMs)} ms per step`)
  console.log(`BENCH telemetry steps_per_s=${fmt(stepsPerSec, 0)} overhead_pct=${Number.isFinite(overhead) ? fmt(overhead, 4) : 'NA'}`)
}

// Queries the run as the main process does for a live chart, until the writer says stop.
function reader(dbPath: string, runId: string): void {
  const store = TelemetryStore.open(dbPath, { readonly: true })
  const latencies: number[] = []
  const seen: number[] = []
  let stop = false
  process.on('message', () => (stop = true))
  process.send?.('ready')
  const t0 = performance.now()
  const loop = () => {
    // Query in short bursts and yield, so the stop message can arrive.
    for (let i = 0; i < 5 && !stop; i++) {
      const q0 = performance.now()
      const s = store.series(runId, ['loss', 'step_ms'], { maxPoints: 1000 })
      store.expertLoad(runId, 3, { fromStep: Math.max(1, s.step.at(-1)! - 99), maxSteps: 100 })
      latencies.push(performance.now() - q0)
      seen.push(s.step.at(-1) ?? 0)
    }
    if (!stop) return void setImmediate(loop)
    store.close()
    console.log(JSON.stringify({
      queries: latencies.length, seconds: (performance.now() - t0) / 1000, p50: median(latencies),
      p99: quantile(latencies, 0.99), minSteps: Math.min(...seen), maxSteps: Math.max(...seen),
    }))
    // An open IPC channel keeps a forked process alive.
    process.disconnect?.()
  }
  loop()
}

const [mode, a, b] = process.argv.slice(2)
if (mode === 'writer') await writer(a, Number(b))
else if (mode === 'reader') reader(a, b)
else throw new Error('usage: telemetry-bench.mjs writer DIR TINY_STEP_MS | reader DB RUN')
