// The step record packed by the addon (native/addon/step_record_pack.h) decodes in TS to what went in.
import { describe, expect, it } from 'vitest'

import { loadEngineAddon } from '../../main/host/engine/addon'
import { decodeStepRecord, encodeStepRecord, type EngineStepRecord } from '../../main/host/engine/step-record'

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
      tiers: record.expertTokens.map((t) => new Uint8Array(t.length).fill(2)),
      pins: record.expertTokens.map((t, l) => Uint8Array.from(t, (_, e) => (e === l ? 1 : 0))),
    }
    expect(decodeStepRecord(packStepRecord(offloaded))).toEqual(offloaded)
    expect(new Uint8Array(packStepRecord(offloaded))).toEqual(new Uint8Array(encodeStepRecord(offloaded)))
    expect(decodeStepRecord(packStepRecord(record)).tiers).toBeUndefined()
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
    }
    expect(decodeStepRecord(packStepRecord(placed))).toEqual(placed)
    expect(new Uint8Array(packStepRecord(placed))).toEqual(new Uint8Array(encodeStepRecord(placed)))
    const packed = packStepRecord(placed)
    expect(() => decodeStepRecord(packed.slice(0, packed.byteLength - 4))).toThrow(/expected/)
  })

  it('rejects a truncated or padded buffer', () => {
    const packed = packStepRecord(record)
    expect(() => decodeStepRecord(packed.slice(0, packed.byteLength - 4))).toThrow(/expected/)
    const padded = new Uint8Array(packed.byteLength + 4)
    padded.set(new Uint8Array(packed))
    expect(() => decodeStepRecord(padded.buffer)).toThrow(/expected/)
  })
})
