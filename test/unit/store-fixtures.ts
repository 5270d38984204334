// Shared builders for the telemetry-store tests: temp databases, valid run records, deterministic
// step records, and a bundle of the store that a plain `node` child process can import.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

import { build } from 'rolldown'
import { afterEach, beforeEach } from 'vitest'

import { RunConfigSchema } from '../../main/api/config'
import { TelemetryStore, type RunRecord, type StepTelemetry } from '../../main/host/store/store'

export const TINY_CONFIG = RunConfigSchema.parse(
  JSON.parse(readFileSync(new URL('../../resources/presets/tiny.json', import.meta.url), 'utf8')),
)

/** A fresh temp directory, removed by the returned cleanup. */
export function tempDir(): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), 'moe-store-test-'))
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) }
}

/** A fresh store file in a temporary directory holding one run, `r1` (the store tests' starting point). */
export function storeWithRun(): { store: TelemetryStore; path: string; cleanup: () => void } {
  const { dir, cleanup } = tempDir()
  const path = join(dir, 'telemetry.sqlite')
  const store = TelemetryStore.open(path)
  store.insertRun(runRecord('r1'))
  return { store, path, cleanup }
}

/** storeWithRun() for each test of the file (or describe block): handed to `set` before it, closed and removed after. */
export function withStoreRun(set: (opened: { store: TelemetryStore; path: string }) => void): void {
  let opened: ReturnType<typeof storeWithRun> | undefined
  beforeEach(() => {
    opened = storeWithRun()
    set(opened)
  })
  afterEach(() => {
    opened?.store.close()
    opened?.cleanup()
  })
}

export function runRecord(id: string, overrides: Partial<RunRecord> = {}): RunRecord {
  return {
    id,
    name: `run ${id}`,
    status: 'queued',
    config: TINY_CONFIG,
    dataset: { path: '/data/corpus.txt' },
    init: null,
    offload: null,
    runDir: `/runs/${id}`,
    createdAt: 1_700_000_000_000,
    startedAt: null,
    finishedAt: null,
    step: 0,
    totalSteps: 100,
    lastLoss: null,
    tokensPerSec: null,
    error: null,
    ...overrides,
  }
}

/** Tokens expert e of MoE layer l got at a step: deterministic and different everywhere. */
export function tokensAt(step: number, layer: number, expert: number): number {
  return (step * 131 + layer * 17 + expert * 7) % 997
}

/** Experts per MoE layer of the records below (TINY_CONFIG: 4 MoE layers of 8 experts). */
export const LAYER_EXPERTS = [8, 8, 8, 8]

export function stepRecord(step: number, overrides: Partial<StepTelemetry> = {}, layerExperts = LAYER_EXPERTS): StepTelemetry {
  return {
    step,
    loss: 5 - step / 1000,
    aux_loss: 0.01 + step * 1e-6,
    lr: 1e-3 * (1 + (step % 10) / 100),
    grad_norm: 1 + (step % 3) / 10,
    tokens: 2048,
    step_ms: 250 + (step % 5),
    forward_ms: 100,
    backward_ms: 120,
    optimizer_ms: 30,
    eval_loss: NaN,
    expertTokens: layerExperts.map((n, l) => Int32Array.from({ length: n }, (_, e) => tokensAt(step, l, e))),
    ...overrides,
  }
}

export function stepRecords(first: number, count: number): StepTelemetry[] {
  return Array.from({ length: count }, (_, i) => stepRecord(first + i))
}

/** Wall time of a step in the records above (ms since epoch). */
export const wallTimeOf = (step: number) => 1_700_000_000_000 + step * 250

/**
 * Bundles main/host/store/store.ts into one ES module under dir, for child processes (which run plain
 * Node and cannot load TypeScript). better-sqlite3 stays external and is imported by absolute path.
 */
export async function bundleStore(dir: string): Promise<string> {
  const file = join(dir, 'store.mjs')
  const betterSqlite = createRequire(import.meta.url).resolve('better-sqlite3')
  await build({
    input: fileURLToPath(new URL('../../main/host/store/store.ts', import.meta.url)),
    platform: 'node',
    external: ['better-sqlite3'],
    logLevel: 'silent',
    output: { file, format: 'esm', paths: { 'better-sqlite3': betterSqlite } },
  })
  return file
}
