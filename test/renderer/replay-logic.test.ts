// Pure replay logic: imbalance ratio, spikes, the scrub/play state machine, the keyboard map, device
// loads and the step lookups.
import { describe, expect, it } from 'vitest'

import { deviceLoads, expertStates, placementSummary } from '../../renderer/replay/devices'
import { imbalanceRatio, imbalanceSeries, quantile } from '../../renderer/replay/imbalance'
import { commandForKey, keyBelongsToField } from '../../renderer/replay/keyboard'
import { initialPlayback, playback } from '../../renderer/replay/playback'
import { findSpikes, nextSpike, previousSpike } from '../../renderer/replay/spikes'
import { alignedWindow, bucketOf } from '../../renderer/replay/step-index'

const key = (k: string, mods: Partial<{ shiftKey: boolean; ctrlKey: boolean; metaKey: boolean; altKey: boolean }> = {}) => ({
  key: k, shiftKey: false, ctrlKey: false, metaKey: false, altKey: false, ...mods,
})

describe('imbalance', () => {
  it('is max over mean tokens per expert, NaN for an empty row', () => {
    expect(imbalanceRatio([10, 10, 10, 10], 0, 4)).toBe(1)
    expect(imbalanceRatio([40, 0, 0, 0], 0, 4)).toBe(4)
    expect(imbalanceRatio([0, 0, 30, 10], 0, 2)).toBeNaN()
    expect(imbalanceRatio([0, 0, 30, 10], 2, 2)).toBe(1.5)
  })

  it('gives one ratio per step row and nearest-rank quantiles of the finite ones', () => {
    expect(Array.from(imbalanceSeries([1, 1, 3, 1, 0, 0], 2))).toEqual([1, 1.5, Number.NaN])
    expect(quantile([5, 1, 4, 2, 3, Number.NaN], 0.8)).toBe(4)
    expect(quantile([5, 1, 4, 2, 3], 1)).toBe(5)
    expect(quantile([], 0.5)).toBeNaN()
  })
})

describe('spikes', () => {
  const steps = [1, 2, 3, 4, 5, 6, 7, 8, 9]
  const ratios = [1, 3, 4, 2, 1, 5, Number.NaN, 6, 6]
  const spikes = findSpikes(steps, ratios, 2.5)

  it('are episodes above the threshold, landing on their peak', () => {
    expect(spikes).toEqual([
      { step: 3, ratio: 4, firstStep: 2, lastStep: 3 },
      { step: 6, ratio: 5, firstStep: 6, lastStep: 6 },
      { step: 8, ratio: 6, firstStep: 8, lastStep: 9 },
    ])
  })

  it('are found after and before a step', () => {
    expect(nextSpike(spikes, 1)?.step).toBe(3)
    expect(nextSpike(spikes, 3)?.step).toBe(6)
    expect(nextSpike(spikes, 8)).toBeUndefined()
    expect(previousSpike(spikes, 6)?.step).toBe(3)
    expect(previousSpike(spikes, 100)?.step).toBe(8)
    expect(previousSpike(spikes, 3)).toBeUndefined()
  })
})

describe('playback', () => {
  it('clamps seeks and steps to the run, and stepping by hand stops playing', () => {
    let s = initialPlayback(1, 100, 50)
    s = playback(s, { type: 'seek', step: 500 })
    expect(s.step).toBe(100)
    s = playback(playback(playback(s, { type: 'seek', step: 50 }), { type: 'play' }), { type: 'stepBy', delta: -10 })
    expect(s).toMatchObject({ step: 40, playing: false })
    expect(playback(s, { type: 'stepBy', delta: -1000 }).step).toBe(1)
  })

  it('advances by speed × time, carrying fractions, and stops at the last step', () => {
    let s = playback(initialPlayback(1, 10, 1, 5), { type: 'play' })
    s = playback(s, { type: 'tick', elapsedMs: 100 }) // 0.5 step
    expect(s.step).toBe(1)
    s = playback(s, { type: 'tick', elapsedMs: 100 }) // 1.0 step
    expect(s.step).toBe(2)
    s = playback(s, { type: 'tick', elapsedMs: 10_000 })
    expect(s).toMatchObject({ step: 10, playing: false })
    expect(playback(s, { type: 'tick', elapsedMs: 1000 })).toBe(s)
  })

  it('starts over when played from the end, toggles, and keeps the step inside a new range', () => {
    const atEnd = initialPlayback(1, 10, 10)
    expect(playback(atEnd, { type: 'toggle' })).toMatchObject({ step: 1, playing: true })
    expect(playback(playback(atEnd, { type: 'toggle' }), { type: 'toggle' }).playing).toBe(false)
    expect(playback(atEnd, { type: 'setRange', first: 1, last: 5 }).step).toBe(5)
    expect(playback(atEnd, { type: 'setSpeed', speed: 100 }).speed).toBe(100)
  })
})

describe('keyboard map', () => {
  it('maps the documented shortcuts', () => {
    expect(commandForKey(key(' '))).toEqual({ kind: 'togglePlay' })
    expect(commandForKey(key('ArrowRight'))).toEqual({ kind: 'step', delta: 1 })
    expect(commandForKey(key('ArrowLeft', { shiftKey: true }))).toEqual({ kind: 'step', delta: -10 })
    expect(commandForKey(key('PageDown'))).toEqual({ kind: 'spike', direction: 1 })
    expect(commandForKey(key('PageUp'))).toEqual({ kind: 'spike', direction: -1 })
    expect(commandForKey(key(']'))).toEqual({ kind: 'layer', delta: 1 })
    expect(commandForKey(key('['))).toEqual({ kind: 'layer', delta: -1 })
  })

  it('leaves modified keys, other keys and text fields alone, but takes a slider\'s keys', () => {
    expect(commandForKey(key('ArrowRight', { ctrlKey: true }))).toBeNull()
    expect(commandForKey(key('a'))).toBeNull()
    expect(keyBelongsToField({ tagName: 'INPUT', type: 'number' })).toBe(true)
    expect(keyBelongsToField({ tagName: 'SELECT' })).toBe(true)
    expect(keyBelongsToField({ tagName: 'INPUT', type: 'range' })).toBe(false)
    expect(keyBelongsToField({ tagName: 'DIV' })).toBe(false)
    expect(keyBelongsToField(null)).toBe(false)
  })
})

describe('device loads', () => {
  const devices = { loadBefore: [40, 60], loadAfter: [70, 30], imbalanceBefore: 1.2, imbalanceAfter: 1.4, spilledTokens: 30, movedExperts: 1, execution: null }
  const layer = { tokens: [10, 20, 30, 40], placement: [1, -1, 0, 0], tiers: [0, 1, 2, 0], pins: [1, 0, 0, 0], spilled: [0, 5, 0, 0], devices }

  it('are the recorded loads before and after, with the layer’s imbalance, spills and copies', () => {
    expect(deviceLoads(layer)).toEqual({
      devices: 2, before: [40, 60], after: [70, 30], imbalanceBefore: 1.2, imbalanceAfter: 1.4, spilledTokens: 30, movedExperts: 1,
    })
    expect(placementSummary(deviceLoads(layer)!)).toBe('max/mean 1.20 → 1.40 · 30 tokens spilled · 1 weight copy')
    expect(placementSummary({ ...deviceLoads(layer)!, spilledTokens: 1234, movedExperts: 3 })).toMatch(/1,234 tokens spilled · 3 weight copies$/)
  })

  it('are none when the step placed nothing', () => {
    expect(deviceLoads({ devices: null })).toBeNull()
  })

  it('describe every expert, null where the run did not record it or the expert had no rows to place', () => {
    expect(expertStates(layer)[0]).toEqual({ expert: 0, tokens: 10, device: 1, tier: 'device', pinned: true, spilled: 0, bias: null })
    expect(expertStates(layer)[1]).toEqual({ expert: 1, tokens: 20, device: null, tier: 'host', pinned: false, spilled: 5, bias: null })
    expect(expertStates({ tokens: [7], placement: null, tiers: null, pins: null, spilled: null })[0]).toEqual({
      expert: 0, tokens: 7, device: null, tier: null, pinned: null, spilled: null, bias: null,
    })
    expect(expertStates({ ...layer, selectionBias: [0.5, -0.25, 0, 1e-3] }).map((s) => s.bias)).toEqual([0.5, -0.25, 0, 1e-3])
  })
})

describe('step lookups', () => {
  it('finds the bucket holding a step', () => {
    expect(bucketOf([1, 11, 21], 15)).toBe(1)
    expect(bucketOf([1, 11, 21], 21)).toBe(2)
    expect(bucketOf([1, 11, 21], 0)).toBe(-1)
  })

  it('aligns windows to their size and clips them to the run', () => {
    expect(alignedWindow(250, 200, 1, 1000)).toEqual({ fromStep: 201, toStep: 400 })
    expect(alignedWindow(990, 200, 1, 1000)).toEqual({ fromStep: 801, toStep: 1000 })
    expect(alignedWindow(5, 200, 1, 50)).toEqual({ fromStep: 1, toStep: 50 })
  })
})
