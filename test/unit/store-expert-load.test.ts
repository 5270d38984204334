
import { describe, expect, test } from 'vitest'

import { encodeLayered, layeredArrays, viewLayered, type ElementBytes } from '../../main/host/store/blobs'
import { openDatabase } from '../../main/host/store/db'
import { EXPERT_TIER, TelemetryStore } from '../../main/host/store/store'
import { placementOf } from '../bench/synthetic-placement'
import { TINY_CONFIG, stepRecord, tokensAt, wallTimeOf, withStoreRun } from './store-fixtures'

describe('layered blob codec', () => {
  const layers = [Int32Array.of(5, -3, 0), Int32Array.of(), Int32Array.of(127, -128, 1, 2)]

  test.each([1, 2, 4] as ElementBytes[])('round trips %i-byte elements and has the documented layout', (bytes) => {
    const blob = encodeLayered(layers, bytes)
    const header = new DataView(blob.buffer)
    expect([0, 4, 8, 12, 16, 20].map((at) => header.getInt32(at, true))).toEqual([bytes, 3, 0, 3, 3, 7])
    expect(blob.byteLength).toBe(24 + 7 * bytes)
    expect(layeredArrays(viewLayered(blob))).toEqual(layers)
    expect(viewLayered(blob).at(2, 0)).toBe(127)
  })

  test('reads a blob that does not start at offset 0 of its buffer (as drivers may return)', () => {
    const blob = encodeLayered(layers, 4)
    const shifted = new Uint8Array(blob.byteLength + 3)
    shifted.set(blob, 3)
    expect(layeredArrays(viewLayered(shifted.subarray(3)))).toEqual(layers)
  })

  test('values outside the element type are refused', () => {
    expect(() => encodeLayered([Int32Array.of(128)], 1)).toThrow('layer 0 element 0: 128 is not an integer in [-128, 127]')
    expect(() => encodeLayered([[1, 2.5]], 4)).toThrow(/element 1: 2.5/)
  })

  test('corrupt headers are refused', () => {
    const good = encodeLayered(layers, 4)
    const withWord = (at: number, value: number) => {
      const copy = good.slice()
      new DataView(copy.buffer).setInt32(at, value, true)
      return copy
    }
    expect(() => viewLayered(good.subarray(0, 8))).toThrow(/shorter than the header/)
    expect(() => viewLayered(withWord(0, 3))).toThrow(/element size 3/)
    expect(() => viewLayered(withWord(4, 1000))).toThrow(/1000 layers/)
    expect(() => viewLayered(withWord(12, 9))).toThrow(/not increasing/)
    expect(() => viewLayered(good.subarray(0, good.byteLength - 4))).toThrow(/expected/)
  })
})

describe('expert loads through the store', () => {
  let path: string
  let store: TelemetryStore
  withStoreRun((opened) => ({ store, path } = opened))

  // A PR-MoE pyramid: layers with different expert counts, to catch slicing at the wrong offsets.
  const PYRAMID = [4, 6, 8]
  const appendPyramid = (steps: number) =>
    store.appendSteps(
      'r1',
      Array.from({ length: steps }, (_, i) => stepRecord(i + 1, {}, PYRAMID)),
      Array.from({ length: steps }, (_, i) => wallTimeOf(i + 1)),
    )

  test('each layer reads back exactly when the range fits maxSteps', () => {
    appendPyramid(30)
    for (const [layer, experts] of PYRAMID.entries()) {
      const load = store.expertLoad('r1', layer, { fromStep: 11, toStep: 20, maxSteps: 10 })
      expect(load.layer).toBe(layer)
      expect(load.experts).toBe(experts)
      expect(load.steps).toEqual([11, 12, 13, 14, 15, 16, 17, 18, 19, 20])
      expect(load.counts).toEqual(load.steps.flatMap((s) => Array.from({ length: experts }, (_, e) => tokensAt(s, layer, e))))
    }
  })

  test('more steps than maxSteps are averaged per bucket, labelled by the bucket first step', () => {
    appendPyramid(10)
    const load = store.expertLoad('r1', 1, { maxSteps: 4 })
    // 10 steps in 4 buckets: [1,2] [3,4,5] [6,7] [8,9,10].
    const buckets = [[1, 2], [3, 4, 5], [6, 7], [8, 9, 10]]
    expect(load.steps).toEqual([1, 3, 6, 8])
    const mean = (steps: number[], e: number) => steps.reduce((a, s) => a + tokensAt(s, 1, e), 0) / steps.length
    expect(load.counts).toHaveLength(4 * 6)
    buckets.forEach((steps, b) => {
      for (let e = 0; e < 6; e++) expect(load.counts[b * 6 + e]).toBeCloseTo(mean(steps, e), 12)
    })
  })

  test('a step laid out differently from the first is read through its own header', () => {
    const shapes = [PYRAMID, PYRAMID, [4, 6, 8, 2], [2, 6]]
    store.appendSteps('r1', shapes.map((shape, i) => stepRecord(i + 1, {}, shape)), shapes.map((_, i) => wallTimeOf(i + 1)))
    const load = store.expertLoad('r1', 1, { maxSteps: 10 })
    expect(load.steps).toEqual([1, 2, 3, 4])
    expect(load.counts).toEqual(load.steps.flatMap((s) => Array.from({ length: 6 }, (_, e) => tokensAt(s, 1, e))))
    store.appendSteps('r1', [stepRecord(5, {}, [4, 5, 8])], [wallTimeOf(5)])
    expect(() => store.expertLoad('r1', 1, { maxSteps: 10 })).toThrow('run r1 step 5: layer 1 has 5 experts, not 6')
    expect(() => store.expertLoad('r1', 2, { fromStep: 3, maxSteps: 10 })).toThrow('run r1 step 4: layer 2 is out of range (2 MoE layers)')
  })

  test('a run without steps answers with its configured shape', () => {
    expect(store.expertLoad('r1', 3, { maxSteps: 100 })).toEqual({ layer: 3, experts: TINY_CONFIG.model.n_experts, steps: [], counts: [], bias: null })
    expect(() => store.expertLoad('r1', 4, { maxSteps: 100 })).toThrow('run r1: layer 4 is out of range (4 MoE layers)')
  })

  test('bad arguments are refused', () => {
    appendPyramid(2)
    expect(() => store.expertLoad('r1', 3, { maxSteps: 10 })).toThrow('run r1 step 1: layer 3 is out of range (3 MoE layers)')
    expect(() => store.expertLoad('r1', -1, { maxSteps: 10 })).toThrow(/layer -1/)
    expect(() => store.expertLoad('r1', 0, { maxSteps: 0 })).toThrow(/maxSteps/)
    expect(() => store.expertLoad('ghost', 0, { maxSteps: 10 })).toThrow('unknown run "ghost"')
  })

  test('expert devices, tiers, pins and spilled tokens round trip per step', () => {
    const experts = [4, 4]
    const devices = [Int32Array.of(0, 1, 0, 1), Int32Array.of(1, 1, 0, 2)]
    const tokens = stepRecord(1, {}, experts).expertTokens
    const placement = placementOf(tokens, 3, (l, e) => devices[l]![e]!)
    const tiers = [Int32Array.of(EXPERT_TIER.device, EXPERT_TIER.host, EXPERT_TIER.ssd, 0), Int32Array.of(1, 1, 1, 1)]
    const pins = [Int32Array.of(1, 0, 0, 0), Int32Array.of(0, 0, 0, 1)]
    const spilledTokens = [Int32Array.of(0, 0, 1024, 0), Int32Array.of(5_000_000, 0, 0, 0)]
    store.appendSteps('r1', [stepRecord(1, { placement, tiers, pins, spilledTokens }, experts), stepRecord(2, {}, experts)], [1, 2])
    expect(store.stepLoads('r1', 1)).toEqual({
      tokens,
      placement: devices,
      tiers,
      pins,
      spilledTokens,
      devices: placement.layers.map((l) => ({
        imbalanceBefore: l.imbalanceBefore, imbalanceAfter: l.imbalanceAfter, spilledTokens: l.spilledTokens, movedExperts: l.movedExperts,
        loadBefore: Int32Array.from(l.loadBefore), loadAfter: Int32Array.from(l.loadAfter), execution: null,
      })),
      devicePeakBytes: null,
      selectionBias: null,
    })
    expect(store.stepLoads('r1', 2)).toMatchObject({ placement: null, tiers: null, pins: null, spilledTokens: null, devices: null, devicePeakBytes: null, selectionBias: null })
    expect(store.stepLoads('r1', 3)).toBeUndefined()
  })

  // The bias a float32 engine value would have: step s, layer l, expert e.
  const biasAt = (s: number, l: number, e: number) => Math.fround((e - 2) * 1e-3 * s + l * 0.5)
  const biasOf = (s: number, shape: number[]) => shape.map((n, l) => Float32Array.from({ length: n }, (_, e) => biasAt(s, l, e)))

  test('the selection bias round trips per step and per layer over steps, bucketed like the loads', () => {
    store.appendSteps(
      'r1',
      Array.from({ length: 10 }, (_, i) => stepRecord(i + 1, { selectionBias: biasOf(i + 1, PYRAMID) }, PYRAMID)),
      Array.from({ length: 10 }, (_, i) => wallTimeOf(i + 1)),
    )
    const loads = store.stepLoads('r1', 3)!
    expect(loads.selectionBias!.map((l) => Array.from(l))).toEqual(biasOf(3, PYRAMID).map((l) => Array.from(l)))
    for (const [layer, experts] of PYRAMID.entries()) {
      const exact = store.expertLoad('r1', layer, { fromStep: 2, toStep: 5, maxSteps: 10 })
      expect(exact.bias).toEqual([2, 3, 4, 5].flatMap((s) => Array.from({ length: experts }, (_, e) => biasAt(s, layer, e))))
    }
    // 10 steps in 4 buckets: [1,2] [3,4,5] [6,7] [8,9,10], each the mean of its steps.
    const bucketed = store.expertLoad('r1', 1, { maxSteps: 4 })
    expect(bucketed.steps).toEqual([1, 3, 6, 8])
    ;[[1, 2], [3, 4, 5], [6, 7], [8, 9, 10]].forEach((steps, b) => {
      for (let e = 0; e < 6; e++)
        expect(bucketed.bias![b * 6 + e]).toBeCloseTo(steps.reduce((a, s) => a + biasAt(s, 1, e), 0) / steps.length, 12)
    })
  })

  test('a run without a selection bias reads null; a bias not of the loads’ shape or not finite is refused', () => {
    appendPyramid(2)
    expect(store.expertLoad('r1', 0, { maxSteps: 10 }).bias).toBeNull()
    expect(store.stepLoads('r1', 1)!.selectionBias).toBeNull()
    expect(() => store.appendSteps('r1', [stepRecord(3, { selectionBias: biasOf(3, [4, 6]) }, PYRAMID)], [wallTimeOf(3)])).toThrow(
      'run r1 step 3: selectionBias does not have the shape of expertTokens',
    )
    expect(() => store.appendSteps('r1', [stepRecord(3, { selectionBias: [[NaN, 0, 0, 0], new Float32Array(6), new Float32Array(8)] }, PYRAMID)], [wallTimeOf(3)])).toThrow(
      /run r1 step 3: selectionBias: element 0: NaN is not finite/,
    )
  })

  test('a corrupt selection bias blob is reported with its run and step', () => {
    store.appendSteps('r1', [1, 2].map((s) => stepRecord(s, { selectionBias: biasOf(s, PYRAMID) }, PYRAMID)), [1, 2].map(wallTimeOf))
    const db = openDatabase(path)
    db.prepare("UPDATE expert_loads SET selection_bias = x'0000' WHERE step = 2").run()
    db.close()
    expect(() => store.stepLoads('r1', 2)).toThrow(/^run r1 step 2: expert_loads.selection_bias is corrupt: /)
    expect(() => store.expertLoad('r1', 0, { maxSteps: 10 })).toThrow(/^run r1 step 2: expert_loads.selection_bias is corrupt: /)
  })

  test('a corrupt blob is reported with its run and step', () => {
    appendPyramid(3)
    const db = openDatabase(path)
    db.prepare("UPDATE expert_loads SET tokens = x'0400000001000000' WHERE step = 2").run()
    db.close()
    expect(() => store.expertLoad('r1', 0, { maxSteps: 10 })).toThrow(/^run r1 step 2: expert_loads.tokens is corrupt: /)
    expect(() => store.stepLoads('r1', 2)).toThrow(/^run r1 step 2: expert_loads.tokens is corrupt/)
  })
})
