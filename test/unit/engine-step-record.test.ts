// The step record packed by the addon (native/addon/step_record_pack.h) decodes in TS to what went in:
// version 7, every scalar of the field table, each expert's selection bias, each expert's spilled tokens and each MoE layer's execution on the
// devices.
import { describe, expect, it } from 'vitest'

import { loadEngineAddon } from '../../main/host/engine/addon'
import { OFFLOAD_FIELD_NAMES } from '../../main/api/step-fields'
import { decodeStepRecord, encodeStepRecord, STEP_RECORD_VERSION, type EngineStepRecord } from '../../main/host/engine/step-record'

const record: EngineStepRecord = {
  step: 12345,
  loss: 3.141592653589793,
  aux_loss: 0.0123,
  lr: 2.5e-4,
  grad_norm: 0.75,
  tokens: 2 ** 40 + 3,
  step_ms: 81.5,
  forward_ms: 30.25,
  backward_ms: 45.125,
  optimizer_ms: 6.0625,
  eval_loss: 2.5,
  expertTokens: [Int32Array.of(5, 0, 17, 2_000_000_000), Int32Array.of(1, 2), Int32Array.of(7, 8, 9, 10, 11, 12, 13, 14)],
}

describe('step record: C++ pack <-> TS decode', () => {
  const { packStepRecord } = loadEngineAddon()

  it('round-trips scalars and per-layer expert arrays exactly', () => {
    expect(decodeStepRecord(packStepRecord(record))).toEqual(record)
  })

  it('packs byte for byte as the TS encoder does', () => {
    expect(new Uint8Array(packStepRecord(record))).toEqual(new Uint8Array(encodeStepRecord(record)))
  })

  it('handles a record without MoE layers and layers of different widths', () => {
    const none = { ...record, expertTokens: [] }
    expect(decodeStepRecord(packStepRecord(none))).toEqual(none)
    const ragged = { ...record, expertTokens: [Int32Array.of(1), new Int32Array(64).fill(-1)] }
    expect(decodeStepRecord(packStepRecord(ragged))).toEqual(ragged)
  })

  it('carries the offload measurements, tiers and pins of an offloaded step', () => {
    const offloaded: EngineStepRecord = {
      ...record, upload_ms: 1.5, upload_hidden_ms: 1.25, stall_ms: 0.25, bytes_h2d: 2 ** 33 + 1, bytes_d2h: 4096,
      peak_device_bytes: 123456789, peak_host_bytes: 2 ** 40, peak_ssd_bytes: 2 ** 41 + 4096, ssd_ms: 12.5,
      bytes_ssd_read: 3 * 2 ** 30, bytes_ssd_write: 2 ** 31, cache_hits: 17, cache_misses: 3, prefetch_lead_ms: 0.75,
      ssd_read_ms: 9.25,
      tiers: record.expertTokens.map((t) => new Uint8Array(t.length).fill(2)),
      pins: record.expertTokens.map((t, l) => Uint8Array.from(t, (_, e) => (e === l ? 1 : 0))),
    }
    expect(decodeStepRecord(packStepRecord(offloaded))).toEqual(offloaded)
    expect(new Uint8Array(packStepRecord(offloaded))).toEqual(new Uint8Array(encodeStepRecord(offloaded)))
    expect(decodeStepRecord(packStepRecord(record)).tiers).toBeUndefined()
  })

  it('carries every offload-only field of the table, each at its own place, and none on a resident step', () => {
    const tiers = record.expertTokens.map((t) => new Uint8Array(t.length).fill(1))
    const pins = record.expertTokens.map((t) => new Uint8Array(t.length))
    const values = Object.fromEntries(OFFLOAD_FIELD_NAMES.map((name, i) => [name, 1000 + i]))
    const offloaded: EngineStepRecord = { ...record, ...values, tiers, pins }
    expect(decodeStepRecord(packStepRecord(offloaded))).toEqual(offloaded)
    const resident = decodeStepRecord(packStepRecord({ ...record, ...values }))
    for (const name of OFFLOAD_FIELD_NAMES) expect(resident[name], name).toBeUndefined()
  })

  it('carries each expert’s selection bias as float32, with a placement too, and none without one', () => {
    const selectionBias = record.expertTokens.map((t, l) => Float32Array.from(t, (_, e) => (e - 1) * 0.015625 + l * 1e-3))
    const biased: EngineStepRecord = { ...record, selectionBias }
    expect(decodeStepRecord(packStepRecord(biased))).toEqual(biased)
    expect(new Uint8Array(packStepRecord(biased))).toEqual(new Uint8Array(encodeStepRecord(biased)))
    // 4 bytes of flag always, 4 per expert with the bias.
    expect(encodeStepRecord(biased).byteLength - encodeStepRecord(record).byteLength).toBe(4 * (4 + 2 + 8))
    expect(decodeStepRecord(packStepRecord(record)).selectionBias).toBeUndefined()
    const both: EngineStepRecord = { ...placedOn(2), selectionBias }
    expect(decodeStepRecord(packStepRecord(both))).toEqual(both)
    expect(new Uint8Array(packStepRecord(both))).toEqual(new Uint8Array(encodeStepRecord(both)))
    expect(() => packStepRecord({ ...record, selectionBias: [Float32Array.of(1)] })).toThrow(/selectionBias must have the shape of expertTokens/)
  })

  it('carries the placement of a multi-device step', () => {
    const placed: EngineStepRecord = {
      ...record,
      placement: {
        devices: 3,
        layers: record.expertTokens.map((t, l) => ({
          imbalanceBefore: 2.5 + l, imbalanceAfter: 1.1, spilledTokens: 100 * l, movedExperts: l,
          loadBefore: Float64Array.of(1, 2, 3 + l), loadAfter: Float64Array.of(2, 2, 2 + l),
          expertDevice: Int32Array.from(t, (_, e) => (e % 4 === 3 ? -1 : e % 3)),
        })),
      },
      spilledTokens: record.expertTokens.map((t, l) => Int32Array.from(t, (_, e) => (e === 1 ? 7 + l : 0))),
    }
    expect(decodeStepRecord(packStepRecord(placed))).toEqual(placed)
    expect(new Uint8Array(packStepRecord(placed))).toEqual(new Uint8Array(encodeStepRecord(placed)))
    const packed = packStepRecord(placed)
    expect(() => decodeStepRecord(packed.slice(0, packed.byteLength - 4))).toThrow(/expected/)
  })

  const placedOn = (devices: number): EngineStepRecord => ({
    ...record,
    placement: {
      devices,
      layers: record.expertTokens.map((t, l) => ({
        imbalanceBefore: 2.5 + l, imbalanceAfter: 1.1, spilledTokens: 100 * l, movedExperts: l,
        loadBefore: Float64Array.from({ length: devices }, (_, d) => d + l), loadAfter: new Float64Array(devices).fill(2 + l),
        expertDevice: Int32Array.from(t, (_, e) => (e % 4 === 3 ? -1 : e % devices)),
      })),
    },
    spilledTokens: record.expertTokens.map((t) => Int32Array.from(t, (_, e) => (e % devices === 1 ? e : 0))),
  })
  const executed = (r: EngineStepRecord): EngineStepRecord => {
    const p = r.placement!
    return {
      ...r,
      placement: {
        ...p,
        layers: p.layers.map((l, i) => ({
          ...l,
          execution: {
            deviceBusyMs: Float64Array.from({ length: p.devices }, (_, d) => 1.5 * d + 0.125 * i),
            criticalMs: 7.25 + i, wallMs: 12.5, predictedMs: i === 0 ? 0 : 6.75,
            tokenBytes: 2 ** 33 + i, weightBytes: 3 * 2 ** 20, offloadBytes: i === 1 ? 2 ** 40 + 8 : 0,
            partitions: 1 << i, reuseStrategy: i % 5,
          },
        })),
        devicePeakBytes: Float64Array.from({ length: p.devices }, (_, d) => 2 ** 34 + d),
      },
    }
  }

  it('carries each layer’s execution on the devices and the devices’ peak bytes', () => {
    const run = executed(placedOn(3))
    expect(decodeStepRecord(packStepRecord(run))).toEqual(run)
    expect(new Uint8Array(packStepRecord(run))).toEqual(new Uint8Array(encodeStepRecord(run)))
    const decoded = decodeStepRecord(encodeStepRecord(run)).placement!
    expect(decoded.layers.map((l) => [l.execution!.partitions, l.execution!.reuseStrategy])).toEqual([[1, 0], [2, 1], [4, 2]])
    expect(Array.from(decoded.devicePeakBytes!)).toEqual([2 ** 34, 2 ** 34 + 1, 2 ** 34 + 2])
    // The execution adds 4 bytes of flag, per layer 6 + D f64 and 2 i32, and D f64 of peaks.
    expect(encodeStepRecord(run).byteLength - encodeStepRecord(placedOn(3)).byteLength).toBe(3 * 8 * (6 + 3) + 3 * 8 + 3 * 8)
    const packed = packStepRecord(run)
    expect(() => decodeStepRecord(packed.slice(0, packed.byteLength - 8))).toThrow(/expected/)
  })

  it('one device pipelined records its execution too (n_devices 1)', () => {
    const single = executed(placedOn(1))
    expect(decodeStepRecord(packStepRecord(single))).toEqual(single)
    expect(new Uint8Array(packStepRecord(single))).toEqual(new Uint8Array(encodeStepRecord(single)))
  })

  it('a placement without execution (the engine did not measure it) has a 0 flag and decodes without it', () => {
    const placed = placedOn(2)
    const decoded = decodeStepRecord(packStepRecord(placed))
    expect(decoded).toEqual(placed)
    expect(decoded.placement!.devicePeakBytes).toBeUndefined()
    expect(decoded.placement!.layers.every((l) => l.execution === undefined)).toBe(true)
  })

  it('refuses an execution that is partial or not of D devices, in C++ and in TS', () => {
    const run = executed(placedOn(2))
    const [first, ...rest] = run.placement!.layers
    const partial = { ...run, placement: { ...run.placement!, layers: [{ ...first!, execution: undefined }, ...rest] } }
    expect(() => packStepRecord(partial)).toThrow(/every layer's deviceBusyMs and devicePeakBytes/)
    expect(() => encodeStepRecord(partial)).toThrow(/every layer's deviceBusyMs and devicePeakBytes/)
    const short = { ...run, placement: { ...run.placement!, devicePeakBytes: Float64Array.of(1) } }
    expect(() => packStepRecord(short)).toThrow(/one entry per device/)
    expect(() => encodeStepRecord(short)).toThrow(/of 2 devices/)
  })

  it('refuses another version or another number of scalars, naming what it expected', () => {
    const bad = new Uint8Array(encodeStepRecord(record))
    new DataView(bad.buffer).setFloat64(0, 5, true)
    expect(() => decodeStepRecord(bad.buffer)).toThrow(`step record: version 5, expected ${STEP_RECORD_VERSION}`)
    const more = new Uint8Array(encodeStepRecord(record))
    new DataView(more.buffer).setFloat64(8, 99, true)
    expect(() => decodeStepRecord(more.buffer)).toThrow(/99 scalars, this build knows \d+/)
  })

  it('a placed step without per-expert spills packs them as zeros', () => {
    const { spilledTokens: _, ...unspilled } = placedOn(2)
    const decoded = decodeStepRecord(packStepRecord(unspilled))
    expect(decoded.spilledTokens!.map((l) => Array.from(l))).toEqual(record.expertTokens.map((t) => new Array(t.length).fill(0)))
    expect(new Uint8Array(packStepRecord(unspilled))).toEqual(new Uint8Array(encodeStepRecord(unspilled)))
  })

  it('rejects a truncated or padded buffer', () => {
    const packed = packStepRecord(record)
    expect(() => decodeStepRecord(packed.slice(0, packed.byteLength - 4))).toThrow(/expected/)
    const padded = new Uint8Array(packed.byteLength + 4)
    padded.set(new Uint8Array(packed))
    expect(() => decodeStepRecord(padded.buffer)).toThrow(/expected/)
  })
})
