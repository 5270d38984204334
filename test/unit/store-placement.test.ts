// The store's placement across devices: one layer_placements row per step and MoE layer written with the
// step, read back per step (loads per device) and per layer over a step range (imbalance, spills, copies);
// with step record v5, how each layer ran on the devices and each device's peak bytes (migration 4).

import { describe, expect, test } from 'vitest'

import { openDatabase } from '../../main/host/store/db'
import { TelemetryStore } from '../../main/host/store/store'
import { placementOf, type StepPlacement } from '../bench/synthetic-placement'
import { stepRecord, wallTimeOf, withStoreRun } from './store-fixtures'
import { withExecution } from './synthetic-execution'

let path: string
let store: TelemetryStore
withStoreRun((opened) => ({ store, path } = opened))

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
        loadBefore: Int32Array.from(written.loadBefore), loadAfter: Int32Array.from(written.loadAfter), execution: null,
      })
    })
    expect(loads.devicePeakBytes).toBeNull()
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
    refuse({ ...good, devices: 0 }, /run r1 step 2: placement has 0 devices; it needs at least 1/)
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
      criticalMs: [null, null, null, null, null],
      predictedMs: [null, null, null, null, null],
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
      layer: 0, steps: [], imbalanceBefore: [], imbalanceAfter: [], spilledTokens: [], movedExperts: [], criticalMs: [], predictedMs: [],
    })
    expect(() => store.placementSeries('r1', 4, { maxPoints: 100 })).toThrow('run r1: layer 4 is out of range (4 MoE layers)')
    expect(() => store.placementSeries('r1', -1, { maxPoints: 100 })).toThrow(/layer -1 is not a layer index/)
    expect(() => store.placementSeries('r1', 0, { maxPoints: 1 })).toThrow(/maxPoints must be an integer >= 2/)
    expect(() => store.placementSeries('r1', 0, { fromStep: -2, maxPoints: 10 })).toThrow(/fromStep\/toStep/)
    expect(() => store.placementSeries('ghost', 0, { maxPoints: 10 })).toThrow('unknown run "ghost"')
  })
})

// Step s as placedRecord(s), also saying how each layer ran: 4 partitions with S1 (which offloads).
const executedRecord = (step: number) => {
  const r = placedRecord(step)
  return { ...r, placement: withExecution(r.placement, { partitions: 4, reuse: 1, step }) }
}

describe('execution on the devices (step record v5)', () => {
  test('each layer’s busy ms per device, critical / wall / predicted ms, bytes, partitions and reuse, and the devices’ peaks read back as written', () => {
    const r = executedRecord(1)
    store.appendSteps('r1', [r], [wallTimeOf(1)])
    const loads = store.stepLoads('r1', 1)!
    loads.devices!.forEach((d, l) => expect(d.execution).toEqual(r.placement.layers[l]!.execution))
    expect(loads.devices![2]!.execution).toMatchObject({ partitions: 4, reuseStrategy: 1, offloadBytes: 2 ** 33 + 2 })
    expect(loads.devicePeakBytes).toEqual(r.placement.devicePeakBytes)
  })

  test('steps with and without it sit side by side; the series has the critical and predicted ms where measured', () => {
    store.appendSteps('r1', [placedRecord(1), executedRecord(2), placedRecord(3)], [1, 2, 3].map(wallTimeOf))
    const x = executedRecord(2).placement.layers[1]!.execution
    expect(store.placementSeries('r1', 1, { maxPoints: 100 })).toMatchObject({
      steps: [1, 2, 3], criticalMs: [null, x.criticalMs, null], predictedMs: [null, x.predictedMs, null],
    })
    expect(store.stepLoads('r1', 3)).toMatchObject({ devicePeakBytes: null })
    expect(store.stepLoads('r1', 3)!.devices!.every((d) => d.execution === null)).toBe(true)
  })

  test('one device, pipelined, records its layers (n_devices 1)', () => {
    const r = stepRecord(1)
    const placement = withExecution(placementOf(r.expertTokens, 1, () => 0), { partitions: 8, reuse: 0 })
    store.appendSteps('r1', [{ ...r, placement }], [wallTimeOf(1)])
    const loads = store.stepLoads('r1', 1)!
    expect(loads.devices![0]!.execution).toMatchObject({ partitions: 8, reuseStrategy: 0, predictedMs: 0 })
    expect(loads.devices![0]!.execution!.deviceBusyMs).toHaveLength(1)
    expect(loads.devicePeakBytes).toHaveLength(1)
  })

  test('an execution that does not fit its step is refused with its field, and none of the batch is written', () => {
    const r = executedRecord(2)
    const layer0 = (change: object) => ({
      ...r, placement: { ...r.placement, layers: [{ ...r.placement.layers[0]!, execution: { ...r.placement.layers[0]!.execution, ...change } }, ...r.placement.layers.slice(1)] },
    })
    const refuse = (record: object, message: RegExp) =>
      expect(() => store.appendSteps('r1', [executedRecord(1), record as typeof r], [1, 2].map(wallTimeOf))).toThrow(message)
    refuse({ ...r, placement: { ...r.placement, layers: [{ ...r.placement.layers[0]!, execution: undefined }, ...r.placement.layers.slice(1)] } },
      /step 2: placement: 3 of 4 layers say how they ran on the devices; all or none must/)
    refuse(layer0({ deviceBusyMs: new Float64Array(3) }), /step 2: placement layer 0: deviceBusyMs for 3 devices, not 4/)
    refuse(layer0({ deviceBusyMs: Float64Array.of(1, Number.NaN, 1, 1) }), /layer 0: deviceBusyMs: element 1: NaN is not finite/)
    refuse(layer0({ criticalMs: -1 }), /layer 0: criticalMs -1 is not a time/)
    refuse(layer0({ predictedMs: Number.POSITIVE_INFINITY }), /layer 0: predictedMs Infinity is not a time/)
    refuse(layer0({ tokenBytes: 1.5 }), /layer 0: tokenBytes 1.5 is not a byte count/)
    refuse(layer0({ partitions: 0 }), /layer 0: partitions 0 is not in 1 … 64/)
    refuse(layer0({ reuseStrategy: 5 }), /layer 0: reuseStrategy 5 is not 0 \(none\) … 4 \(S4\)/)
    refuse({ ...r, placement: { ...r.placement, devicePeakBytes: Float64Array.of(1, 2) } }, /step 2: devicePeakBytes has 2 devices, the placement 4/)
    refuse({ ...r, placement: { ...r.placement, devicePeakBytes: Float64Array.of(1, 2, 3, -4) } }, /step 2: devicePeakBytes: a peak is not a byte count/)
    expect(store.lastStep('r1')).toBe(0)
  })

  test('a corrupt busy-time or peak blob is reported with its run, step (and layer)', () => {
    store.appendSteps('r1', [executedRecord(1), executedRecord(2)], [1, 2].map(wallTimeOf))
    const db = openDatabase(path)
    db.prepare("UPDATE layer_placements SET device_busy_ms = x'0000' WHERE step = 2 AND layer = 3").run()
    db.prepare("UPDATE expert_loads SET device_peak_bytes = x'000000' WHERE step = 1").run()
    db.close()
    expect(() => store.stepLoads('r1', 2)).toThrow(/^run r1 step 2 layer 3: layer_placements.device_busy_ms is corrupt: 2 bytes is not a whole number of float64s/)
    expect(() => store.stepLoads('r1', 1)).toThrow(/^run r1 step 1: expert_loads.device_peak_bytes is corrupt: /)
  })
})
