
import { describe, expect, test } from 'vitest'

import type { ScalarMetric } from '../../main/api/contract'
import { openDatabase } from '../../main/host/store/db'
import { TelemetryStore } from '../../main/host/store/store'
import { placementOf } from '../bench/synthetic-placement'
import { stepRecord, stepRecords, wallTimeOf, withStoreRun } from './store-fixtures'

const ALL_METRICS: ScalarMetric[] = [
  'loss', 'aux_loss', 'lr', 'grad_norm', 'tokens', 'tokens_per_s', 'step_ms', 'forward_ms', 'backward_ms', 'optimizer_ms',
]

let path: string
let store: TelemetryStore
withStoreRun((opened) => ({ store, path } = opened))

const append = (first: number, count: number) =>
  store.appendSteps('r1', stepRecords(first, count), Array.from({ length: count }, (_, i) => wallTimeOf(first + i)))

describe('offload metrics', () => {
  test('read as missing (NaN) for steps that did not record them, with or without downsampling', () => {
    append(1, 30)
    store.appendSteps('r1', [{ ...stepRecord(31), peak_device_bytes: 4096, bytes_h2d: 512 }], [wallTimeOf(31)])
    const full = store.series('r1', ['peak_device_bytes', 'bytes_h2d', 'loss'], { maxPoints: 2000 })
    expect(full.values.peak_device_bytes!.slice(0, 30).every((v) => Number.isNaN(v))).toBe(true)
    expect(full.values.peak_device_bytes!.at(-1)).toBe(4096)
    expect(full.values.bytes_h2d!.at(-1)).toBe(512)
    const coarse = store.series('r1', ['peak_device_bytes', 'loss'], { maxPoints: 4 })
    expect(coarse.step.at(-1)).toBe(31)
    expect(coarse.values.peak_device_bytes!.at(-1)).toBe(4096)
    expect(coarse.values.loss!.every((v) => Number.isFinite(v))).toBe(true)
  })
})

describe('appendSteps and series', () => {
  test('every scalar reads back as written, with tokens/s derived from tokens and step time', () => {
    append(1, 50)
    const s = store.series('r1', ALL_METRICS, { maxPoints: 2000 })
    expect(s.step).toEqual(Array.from({ length: 50 }, (_, i) => i + 1))
    expect(s.wallTime).toEqual(s.step.map(wallTimeOf))
    for (const [i, step] of s.step.entries()) {
      const r = stepRecord(step)
      for (const m of ALL_METRICS) {
        const expected = m === 'tokens_per_s' ? r.tokens / (r.step_ms / 1000) : r[m]
        expect(s.values[m][i], `${m} at step ${step}`).toBe(expected)
      }
    }
  })

  test('the run row follows the last appended step', () => {
    append(1, 3)
    const last = stepRecord(3)
    expect(store.getRun('r1')).toMatchObject({ step: 3, lastLoss: last.loss, tokensPerSec: last.tokens / (last.step_ms / 1000) })
    expect(store.lastStep('r1')).toBe(3)
  })

  test('optional offload measurements are stored when given and NULL otherwise', () => {
    const extra = { upload_ms: 12.5, stall_ms: 0.25, bytes_h2d: 3 * 2 ** 40, cache_hits: 17, peak_ssd_bytes: 2 ** 33 }
    store.appendSteps('r1', [stepRecord(1, extra), stepRecord(2)], [wallTimeOf(1), wallTimeOf(2)])
    const db = openDatabase(path, { readonly: true })
    const rows = db.prepare('SELECT upload_ms, stall_ms, bytes_h2d, cache_hits, peak_ssd_bytes, ssd_ms FROM steps ORDER BY step').all()
    db.close()
    expect(rows).toEqual([{ ...extra, ssd_ms: null }, { upload_ms: null, stall_ms: null, bytes_h2d: null, cache_hits: null, peak_ssd_bytes: null, ssd_ms: null }])
  })

  test('non-finite values are kept as missing: NaN in series, null in the run summary', () => {
    store.appendSteps('r1', [stepRecord(1), stepRecord(2, { loss: NaN, grad_norm: Infinity })], [wallTimeOf(1), wallTimeOf(2)])
    const s = store.series('r1', ['loss', 'grad_norm'], { maxPoints: 10 })
    expect(s.values.loss).toEqual([stepRecord(1).loss, NaN])
    expect(s.values.grad_norm).toEqual([stepRecord(1).grad_norm, NaN])
    expect(store.getRun('r1')?.lastLoss).toBeNull()
  })

  test('fromStep/toStep select an inclusive range', () => {
    append(1, 20)
    expect(store.series('r1', ['loss'], { fromStep: 5, toStep: 9, maxPoints: 100 }).step).toEqual([5, 6, 7, 8, 9])
    expect(store.series('r1', ['loss'], { fromStep: 18, maxPoints: 100 }).step).toEqual([18, 19, 20])
    expect(store.series('r1', ['loss'], { fromStep: 30, maxPoints: 100 })).toEqual({ step: [], wallTime: [], values: { loss: [] } })
  })

  test('one bad record in a batch writes none of the batch', () => {
    append(1, 2)
    const bad = stepRecord(5, { placement: placementOf([new Int32Array(3)], 2) })
    expect(() => store.appendSteps('r1', [stepRecord(3), stepRecord(4), bad], [3, 4, 5].map(wallTimeOf))).toThrow(
      /run r1 step 5: placement does not have the shape of expertTokens/,
    )
    const huge = stepRecord(4, { spilledTokens: [0, 1, 2, 3].map(() => [0, 1, 2, 3, 4, 5, 6, 2 ** 31]) })
    expect(() => store.appendSteps('r1', [stepRecord(3), huge], [3, 4].map(wallTimeOf))).toThrow(/spilledTokens: layer 0 element 7: 2147483648/)
    expect(store.lastStep('r1')).toBe(2)
    expect(store.getRun('r1')?.step).toBe(2)
    expect(store.series('r1', ['loss'], { maxPoints: 10 }).step).toEqual([1, 2])
  })

  test('steps must be new, increasing and matched by wall times', () => {
    append(1, 5)
    expect(() => store.appendSteps('r1', [stepRecord(5)], [wallTimeOf(5)])).toThrow(
      'run r1: step 5 is not after the last stored step 5; truncateSteps before rewriting steps',
    )
    expect(() => store.appendSteps('r1', [stepRecord(7), stepRecord(6)], [7, 6].map(wallTimeOf))).toThrow(/step 6 does not follow 7/)
    expect(() => store.appendSteps('r1', [stepRecord(6)], [])).toThrow(/1 step records but 0 wall times/)
    expect(() => store.appendSteps('r1', [stepRecord(6.5)], [1])).toThrow(/step 6.5 is not a step number/)
    expect(() => store.appendSteps('ghost', [stepRecord(1)], [1])).toThrow('unknown run "ghost"')
    expect(store.lastStep('r1')).toBe(5)
  })

  test('unknown metrics and bad options are rejected', () => {
    append(1, 3)
    expect(() => store.series('r1', ['loss', 'perplexity' as ScalarMetric], { maxPoints: 10 })).toThrow(
      /metrics must be a non-empty list of loss, .* \(got \["loss","perplexity"\]\)/,
    )
    expect(() => store.series('r1', ['loss; DROP TABLE steps' as ScalarMetric], { maxPoints: 10 })).toThrow(/metrics/)
    expect(() => store.series('r1', [], { maxPoints: 10 })).toThrow(/non-empty/)
    expect(() => store.series('r1', ['loss'], { maxPoints: 1 })).toThrow(/maxPoints/)
    expect(() => store.series('r1', ['loss'], { fromStep: -1, maxPoints: 10 })).toThrow(/fromStep/)
    expect(() => store.series('ghost', ['loss'], { maxPoints: 10 })).toThrow('unknown run "ghost"')
    expect(store.lastStep('r1')).toBe(3)
  })
})

describe('truncateSteps', () => {
  test('drops later steps and their loads, rewinds the run, and lets the resumed run append again', () => {
    append(1, 10)
    store.truncateSteps('r1', 6)
    expect(store.lastStep('r1')).toBe(6)
    const at6 = stepRecord(6)
    expect(store.getRun('r1')).toMatchObject({ step: 6, lastLoss: at6.loss, tokensPerSec: at6.tokens / (at6.step_ms / 1000) })
    expect(store.series('r1', ['loss'], { maxPoints: 100 }).step).toEqual([1, 2, 3, 4, 5, 6])
    expect(store.expertLoad('r1', 0, { maxSteps: 100 }).steps).toEqual([1, 2, 3, 4, 5, 6])
    expect(store.stepLoads('r1', 7)).toBeUndefined()

    const resumed = stepRecord(7, { loss: 9.5 })
    store.appendSteps('r1', [resumed], [wallTimeOf(7)])
    expect(store.series('r1', ['loss'], { fromStep: 7, maxPoints: 10 }).values.loss).toEqual([9.5])
  })

  test('truncating to 0 empties the run', () => {
    append(1, 4)
    store.truncateSteps('r1', 0)
    expect(store.lastStep('r1')).toBe(0)
    expect(store.getRun('r1')).toMatchObject({ step: 0, lastLoss: null, tokensPerSec: null })
    expect(() => store.truncateSteps('r1', -1)).toThrow(/cannot truncate/)
    expect(() => store.truncateSteps('ghost', 0)).toThrow(/unknown run/)
  })
})
