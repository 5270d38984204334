import { join } from 'node:path'

import { afterEach, beforeEach, describe, expect, test } from 'vitest'

import { minMaxIndices } from '../../main/host/store/downsample'
import { TelemetryStore } from '../../main/host/store/store'
import { runRecord, stepRecord, tempDir, wallTimeOf } from './store-fixtures'

// A small deterministic generator, so failures reproduce.
function lcg(seed: number): () => number {
  let s = seed >>> 0
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32)
}

function argExtremes(values: Float64Array): [number, number] {
  let min = 0
  let max = 0
  values.forEach((v, i) => {
    if (v < values[min]) min = i
    if (v > values[max]) max = i
  })
  return [min, max]
}

describe('minMaxIndices', () => {
  test('short series are returned whole', () => {
    expect(minMaxIndices([Float64Array.of(3, 1, 2)], 3, 3)).toEqual([0, 1, 2])
  })

  test('bounded, strictly increasing, first and last kept, every column keeps its global min and max', () => {
    const next = lcg(42)
    for (let trial = 0; trial < 200; trial++) {
      const n = 3 + Math.floor(next() * 3000)
      const maxPoints = 2 + Math.floor(next() * 300)
      const columns = Array.from({ length: 1 + Math.floor(next() * 4) }, () => Float64Array.from({ length: n }, () => next()))
      const picked = minMaxIndices(columns, n, maxPoints)
      const context = `n=${n} maxPoints=${maxPoints} columns=${columns.length}`
      expect(picked.length, context).toBeLessThanOrEqual(Math.min(n, maxPoints))
      expect(picked[0], context).toBe(0)
      expect(picked.at(-1), context).toBe(n - 1)
      picked.slice(1).forEach((p, i) => expect(p, context).toBeGreaterThan(picked[i]))
      if (maxPoints >= 2 + 2 * columns.length)
        for (const c of columns) for (const extreme of argExtremes(c)) expect(picked, context).toContain(extreme)
    }
  })

  test('uses the budget: a single column gets close to maxPoints', () => {
    const values = Float64Array.from({ length: 100_000 }, (_, i) => Math.sin(i / 7) + (i % 13) / 13)
    const picked = minMaxIndices([values], values.length, 2000)
    expect(picked.length).toBeLessThanOrEqual(2000)
    expect(picked.length).toBeGreaterThan(1900)
  })

  test('NaN never wins a bucket', () => {
    const values = Float64Array.from({ length: 1000 }, (_, i) => (i % 2 ? NaN : i))
    const picked = minMaxIndices([values], values.length, 50)
    expect(picked.slice(1, -1).every((i) => !Number.isNaN(values[i]))).toBe(true)
  })
})

describe('series downsampling through the store', () => {
  let cleanup: () => void
  let store: TelemetryStore
  beforeEach(() => {
    let dir: string
    ;({ dir, cleanup } = tempDir())
    store = TelemetryStore.open(join(dir, 'telemetry.sqlite'))
    store.insertRun(runRecord('r1'))
  })
  afterEach(() => {
    store.close()
    cleanup()
  })

  test('10,000 steps down to 500 points keep a one-step loss spike, a grad-norm dip, and both ends', () => {
    const steps = 10_000
    const records = Array.from({ length: steps }, (_, i) =>
      stepRecord(i + 1, {
        loss: i + 1 === 7_777 ? 50 : 3 + Math.cos(i / 100) * 0.1,
        grad_norm: i + 1 === 3_333 ? 0.001 : 1 + ((i * 7) % 11) / 100,
      }),
    )
    for (let i = 0; i < steps; i += 1000)
      store.appendSteps('r1', records.slice(i, i + 1000), records.slice(i, i + 1000).map((r) => wallTimeOf(r.step)))

    const s = store.series('r1', ['loss', 'grad_norm'], { maxPoints: 500 })
    expect(s.step.length).toBeLessThanOrEqual(500)
    expect(s.step.length).toBeGreaterThan(250)
    expect(s.step[0]).toBe(1)
    expect(s.step.at(-1)).toBe(steps)
    s.step.slice(1).forEach((step, i) => expect(step).toBeGreaterThan(s.step[i]))
    expect(s.values.loss[s.step.indexOf(7_777)]).toBe(50)
    expect(s.values.grad_norm[s.step.indexOf(3_333)]).toBe(0.001)
    expect(s.wallTime).toEqual(s.step.map(wallTimeOf))
    // Every returned value is the real value at its step, not an aggregate.
    s.step.forEach((step, i) => expect(s.values.loss[i]).toBe(records[step - 1].loss))

    const window = store.series('r1', ['loss'], { fromStep: 7_000, toStep: 8_000, maxPoints: 20 })
    expect(window.step[0]).toBe(7_000)
    expect(window.step.at(-1)).toBe(8_000)
    expect(window.step).toContain(7_777)
    expect(window.step.length).toBeLessThanOrEqual(20)
  })
})
