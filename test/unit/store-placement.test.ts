// The store's placement across devices: one layer_placements row per step and MoE layer written with the
// step, read back per step (loads per device) and per layer over a step range (imbalance, spills, copies).

import { afterEach, beforeEach, describe, expect, test } from 'vitest'

import { openDatabase } from '../../main/host/store/db'
import { TelemetryStore } from '../../main/host/store/store'
import { placementOf, type StepPlacement } from '../bench/synthetic-placement'
import { stepRecord, storeWithRun, wallTimeOf } from './store-fixtures'

let cleanup: () => void
let path: string
let store: TelemetryStore
beforeEach(() => {
  ;({ store, path, cleanup } = storeWithRun())
})
afterEach(() => {
  store.close()
  cleanup()
})

// Step s puts every expert on device (e + s) mod 4: a different placement, and different loads, each step.
const placedRecord = (step: number) => {
  const r = stepRecord(step)
  return { ...r, placement: placementOf(r.expertTokens, 4, (_, e) => (e + step) % 4) }
}
const appendPlaced = (first: number, count: number) => {
  const records = Array.from({ length: count }, (_, i) => placedRecord(first + i))
  store.appendSteps('r1', records, records.map((r) => wallTimeOf(r.step)))
  return records
}
const layerOf = (r: ReturnType<typeof placedRecord>, l: number) => r.placement.layers[l]!

describe('placement per step', () => {
  test('every layer’s loads, imbalance, spills, copies and expert devices read back as written', () => {
    const [r] = appendPlaced(1, 1)
    const loads = store.stepLoads('r1', 1)!
    expect(loads.placement).toEqual(r!.placement.layers.map((l) => l.expertDevice))
    expect(loads.devices).toHaveLength(4)
    loads.devices!.forEach((d, l) => {
      const written = layerOf(r!, l)
      expect(d).toEqual({
        imbalanceBefore: written.imbalanceBefore, imbalanceAfter: written.imbalanceAfter,
        spilledTokens: written.spilledTokens, movedExperts: written.movedExperts,
        loadBefore: Int32Array.from(written.loadBefore), loadAfter: Int32Array.from(written.loadAfter),
      })
    })
  })

  test('a step without placement has none, beside placed steps', () => {
    appendPlaced(1, 1)
    store.appendSteps('r1', [stepRecord(2)], [wallTimeOf(2)])
    expect(store.stepLoads('r1', 2)).toMatchObject({ placement: null, devices: null })
    expect(store.placementSeries('r1', 0, { maxPoints: 100 }).steps).toEqual([1])
  })

  test('a placement that does not fit the step is refused, and none of its batch is written', () => {
    const r = stepRecord(2)
    const good = placementOf(r.expertTokens, 4)
    const refuse = (placement: StepPlacement, message: RegExp) =>
      expect(() => store.appendSteps('r1', [placedRecord(1), { ...r, placement }], [1, 2].map(wallTimeOf))).toThrow(message)
    const layer0 = (change: Partial<StepPlacement['layers'][number]>) => ({ ...good, layers: [{ ...good.layers[0]!, ...change }, ...good.layers.slice(1)] })
    refuse({ ...good, devices: 1 }, /run r1 step 2: placement has 1 devices; placing needs at least 2/)
    refuse({ ...good, layers: good.layers.slice(1) }, /placement does not have the shape of expertTokens/)
    refuse(layer0({ loadAfter: new Float64Array(3) }), /step 2: placement layer 0: loads for 4 and 3 devices, not 4/)
    refuse(layer0({ imbalanceAfter: Number.NaN }), /layer 0: imbalance .* is not finite/)
    refuse(layer0({ spilledTokens: -1 }), /layer 0: spilledTokens -1 is not a count/)
    refuse(layer0({ movedExperts: 1.5 }), /layer 0: movedExperts 1.5 is not a count/)
    refuse(layer0({ expertDevice: new Int32Array(8).fill(4) }), /layer 0: an expert's device is outside -1 … 3/)
    refuse(layer0({ loadBefore: new Float64Array(4).fill(2 ** 31) }), /layer 0: loadBefore: layer 0 element 0: 2147483648/)
    expect(store.lastStep('r1')).toBe(0)
    expect(store.placementSeries('r1', 0, { maxPoints: 100 }).steps).toEqual([])
  })

  test('leaves with its steps: truncation and deleting the run cascade', () => {
    appendPlaced(1, 10)
    store.truncateSteps('r1', 4)
    expect(store.placementSeries('r1', 2, { maxPoints: 100 }).steps).toEqual([1, 2, 3, 4])
    appendPlaced(5, 2)
    expect(store.placementSeries('r1', 2, { maxPoints: 100 }).steps).toEqual([1, 2, 3, 4, 5, 6])
    store.deleteRun('r1')
    const db = openDatabase(path)
    expect(db.prepare('SELECT count(*) AS n FROM layer_placements').get()).toEqual({ n: 0 })
    db.close()
  })

  test('a corrupt load blob is reported with its run, step and layer', () => {
    appendPlaced(1, 2)
    const db = openDatabase(path)
    db.prepare("UPDATE layer_placements SET load_after = x'04000000' WHERE step = 2 AND layer = 1").run()
    db.close()
    expect(() => store.stepLoads('r1', 2)).toThrow(/^run r1 step 2 layer 1: layer_placements.load_after is corrupt: /)
  })
})

describe('placement series', () => {
  test('one layer’s imbalance before and after, spilled tokens and weight copies per step, over an inclusive range', () => {
    const records = appendPlaced(1, 20)
    const series = store.placementSeries('r1', 3, { fromStep: 5, toStep: 9, maxPoints: 100 })
    const expected = records.slice(4, 9).map((r) => layerOf(r, 3))
    expect(series).toEqual({
      layer: 3,
      steps: [5, 6, 7, 8, 9],
      imbalanceBefore: expected.map((l) => l.imbalanceBefore),
      imbalanceAfter: expected.map((l) => l.imbalanceAfter),
      spilledTokens: expected.map((l) => l.spilledTokens),
      movedExperts: expected.map((l) => l.movedExperts),
    })
    expect(store.placementSeries('r1', 3, { fromStep: 30, maxPoints: 100 }).steps).toEqual([])
  })

  test('downsamples to maxPoints keeping the first and last steps and a one-step spike', () => {
    const records = appendPlaced(1, 200)
    const spike = placedRecord(201)
    spike.placement.layers[0] = { ...spike.placement.layers[0]!, imbalanceAfter: 3.75 }
    store.appendSteps('r1', [spike], [wallTimeOf(201)])
    appendPlaced(202, 99)
    const series = store.placementSeries('r1', 0, { maxPoints: 42 })
    expect(series.steps.length).toBeLessThanOrEqual(42)
    expect(series.steps[0]).toBe(1)
    expect(series.steps.at(-1)).toBe(300)
    expect(series.imbalanceAfter[series.steps.indexOf(201)]).toBe(3.75)
    expect(series.imbalanceBefore[0]).toBe(layerOf(records[0]!, 0).imbalanceBefore)
  })

  test('a run that places nothing answers with no steps; bad arguments are refused', () => {
    store.appendSteps('r1', [stepRecord(1)], [wallTimeOf(1)])
    expect(store.placementSeries('r1', 0, { maxPoints: 100 })).toEqual({
      layer: 0, steps: [], imbalanceBefore: [], imbalanceAfter: [], spilledTokens: [], movedExperts: [],
    })
    expect(() => store.placementSeries('r1', 4, { maxPoints: 100 })).toThrow('run r1: layer 4 is out of range (4 MoE layers)')
    expect(() => store.placementSeries('r1', -1, { maxPoints: 100 })).toThrow(/layer -1 is not a layer index/)
    expect(() => store.placementSeries('r1', 0, { maxPoints: 1 })).toThrow(/maxPoints must be an integer >= 2/)
    expect(() => store.placementSeries('r1', 0, { fromStep: -2, maxPoints: 10 })).toThrow(/fromStep\/toStep/)
    expect(() => store.placementSeries('ghost', 0, { maxPoints: 10 })).toThrow('unknown run "ghost"')
  })
})
