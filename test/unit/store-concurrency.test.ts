// The engine process appends steps while the main process reads history: a reader in another
// process must only ever see whole committed batches, never a step without its expert loads.
import { spawn } from 'node:child_process'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'

import { afterEach, beforeEach, expect, test } from 'vitest'

import { TelemetryStore } from '../../main/host/store/store'
import { bundleStore, runRecord, stepRecords, tempDir, wallTimeOf } from './store-fixtures'

const BATCH = 7
const BATCHES = 120

// Runs in a plain `node` child: reads through its own read-only TelemetryStore until the writer marks
// the run finished (or a deadline passes), checking every snapshot. Values follow stepRecord/tokensAt
// in store-fixtures.ts.
const READER = `
const [bundle, dbPath, batch] = process.argv.slice(1)
const deadline = Date.now() + 60_000
const { TelemetryStore } = await import(bundle)
const store = TelemetryStore.open(dbPath, { readonly: true })
const tokensAt = (step, layer, expert) => (step * 131 + layer * 17 + expert * 7) % 997
const problems = []
const sizes = []
console.log('ready')
for (;;) {
  const run = store.getRun('r1')
  const series = store.series('r1', ['loss'], { maxPoints: 1e9 })
  const load = store.expertLoad('r1', 2, { maxSteps: 1e9 })
  const n = series.step.length
  if (run.step % batch || run.step > n) problems.push('run.step ' + run.step + ' with ' + n + ' steps')
  if (n % batch) problems.push('partial batch: ' + n + ' steps')
  if (series.step.some((s, i) => s !== i + 1)) problems.push('steps not 1..' + n)
  if (series.values.loss.some((v, i) => v !== 5 - (i + 1) / 1000)) problems.push('wrong loss at ' + n + ' steps')
  if (load.steps.length < n || load.steps.length % batch) problems.push(load.steps.length + ' loads for ' + n + ' steps')
  if (load.counts.some((c, k) => c !== tokensAt(load.steps[Math.floor(k / 8)], 2, k % 8))) problems.push('wrong loads')
  if (n < sizes.at(-1)) problems.push('went back from ' + sizes.at(-1) + ' to ' + n)
  sizes.push(n)
  if (run.status === 'finished' && n === run.totalSteps) break
  if (Date.now() > deadline) {
    problems.push('gave up waiting for the writer to finish')
    break
  }
}
store.close()
console.log(JSON.stringify({ problems: problems.slice(0, 10), sizes }))
`

let dir: string
let cleanup: () => void
beforeEach(() => ({ dir, cleanup } = tempDir()))
afterEach(() => cleanup())

test('a reader in another process sees only whole committed batches while the writer appends', async () => {
  const bundle = await bundleStore(dir)
  const path = join(dir, 'telemetry.sqlite')
  const writer = TelemetryStore.open(path)
  writer.insertRun(runRecord('r1', { totalSteps: BATCH * BATCHES }))

  const child = spawn(process.execPath, ['--input-type=module', '-e', READER, bundle, path, String(BATCH)], {
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (d: Buffer) => (stdout += d))
  child.stderr.on('data', (d: Buffer) => (stderr += d))
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve))
  try {
    while (!stdout.includes('ready\n')) {
      if (child.exitCode !== null) throw new Error(`reader exited early: ${stderr}`)
      await sleep(10)
    }
    for (let b = 0; b < BATCHES; b++) {
      const first = b * BATCH + 1
      writer.appendSteps('r1', stepRecords(first, BATCH), Array.from({ length: BATCH }, (_, i) => wallTimeOf(first + i)))
      await sleep(2)
    }
    writer.updateRun('r1', { status: 'finished' })
    expect(await exited, stderr).toBe(0)
  } finally {
    child.kill()
    writer.close()
  }

  const report = JSON.parse(stdout.slice(stdout.indexOf('ready\n') + 6)) as { problems: string[]; sizes: number[] }
  expect(report.problems).toEqual([])
  expect(report.sizes.at(-1)).toBe(BATCH * BATCHES)
  // The reader really overlapped the writer: it saw the run at several sizes in between.
  const inBetween = new Set(report.sizes.filter((n) => n > 0 && n < BATCH * BATCHES))
  expect(inBetween.size).toBeGreaterThan(3)
})
