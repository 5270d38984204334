// The run-detail store: history on open and on reconnect, live steps coalesced to ≤ 4 renders/s.
import { createPinia, setActivePinia } from 'pinia'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'

import { coalesce } from '../../renderer/stores/coalesce'
import { appendExpertLoad, appendPoints, appendSteps, emptySeries } from '../../renderer/stores/metric-history'
import { moeLayersOf, useRunDetailStore } from '../../renderer/stores/run-detail'
import { stepEvent } from '../unit/contract-fixtures'
import { fakeClient } from './stores-fake-client'

beforeEach(() => setActivePinia(createPinia()))
afterEach(() => vi.useRealTimers())

const settle = async () => {
  for (let i = 0; i < 10; i++) await Promise.resolve()
}

describe('run-detail store', () => {
  it('reads detail, history, heatmap and imbalance of every MoE layer on open', async () => {
    vi.useFakeTimers()
    const client = fakeClient()
    const store = useRunDetailStore()
    const stop = store.open('run-1', client)
    await settle()
    expect(store.detail?.summary.id).toBe('run-1')
    expect(store.history.step).toEqual([1, 2])
    const layers = store.expertsPerLayer.length
    expect(layers).toBeGreaterThan(0)
    expect(store.imbalance).toHaveLength(layers)
    expect(store.heatmap).toMatchObject({ experts: 2, steps: [1] })
    expect(client.calls('metrics.series')[0]).toMatchObject({ id: 'run-1', maxPoints: 2000 })
    stop()
  })

  it('coalesces live steps into one update per 250 ms and ignores other runs', async () => {
    vi.useFakeTimers()
    const client = fakeClient({ 'metrics.expertLoad': async ({ layer }) => ({ layer, experts: 8, steps: [2], counts: new Array(8).fill(1) }) })
    const store = useRunDetailStore()
    const stop = store.open('run-1', client)
    await settle()
    const before = store.history
    for (let step = 3; step <= 12; step++) client.emit('run.step', stepEvent('run-1', step, 5 - step / 10))
    client.emit('run.step', stepEvent('other', 99, 1))
    expect(store.history).toBe(before) // nothing rendered yet
    vi.advanceTimersByTime(250)
    expect(store.history.step.slice(-3)).toEqual([10, 11, 12])
    expect(store.history.step).not.toContain(99)
    expect(store.heatmap!.steps.at(-1)).toBe(12)
    expect(store.imbalance[0]!.points.at(-1)).toEqual([12, 512 / 256])
    stop()
  })

  it('re-reads everything when the connection comes back', async () => {
    vi.useFakeTimers()
    const client = fakeClient()
    const store = useRunDetailStore()
    const stop = store.open('run-1', client)
    await settle()
    client.connect('closed')
    client.connect('open')
    await settle()
    expect(client.calls('metrics.series')).toHaveLength(4) // scalars and offload metrics, on open and again
    stop()
    expect(store.runId).toBeNull()
  })

  it('keeps the live event log and reports a run that cannot be read', async () => {
    const client = fakeClient({ 'runs.get': async () => Promise.reject(new Error('no run "gone"')) })
    const store = useRunDetailStore()
    const stop = store.open('gone', client)
    await settle()
    expect(store.error).toContain('no run')
    client.emit('run.event', { runId: 'gone', at: 1, kind: 'log', message: 'hello' })
    expect(store.events.map((e) => e.message)).toEqual(['hello'])
    stop()
  })

  it('counts MoE layers and their experts from the config', () => {
    const model = { n_layers: 4, moe_every: 2, n_experts: 8 } as never
    expect(moeLayersOf({ model } as never)).toEqual([8, 8])
    expect(moeLayersOf({ model: { n_layers: 2, moe_every: 1, n_experts: [4, 6] } } as never)).toEqual([4, 6])
  })
})

describe('metric history helpers', () => {
  it('appends only newer steps and thins past twice the cap, newest points kept', () => {
    let history = emptySeries()
    const metrics = (step: number) => stepEvent('r', step, step).metrics
    history = appendSteps(history, [metrics(2), metrics(1)])
    expect(history.step).toEqual([1, 2])
    expect(appendSteps(history, [metrics(2)])).toBe(history)
    for (let s = 3; s <= 50; s++) history = appendSteps(history, [metrics(s)], 10)
    expect(history.step.length).toBeLessThanOrEqual(20)
    expect(history.step.slice(-5)).toEqual([46, 47, 48, 49, 50])
    expect(history.values['loss']!.length).toBe(history.step.length)
  })

  it('keeps the latest expert-load rows and skips mismatched or stale ones', () => {
    let load = { layer: 0, experts: 2, steps: [1], counts: [1, 1] }
    load = appendExpertLoad(load, 2, [2, 2], 2)
    load = appendExpertLoad(load, 3, [3, 3], 2)
    expect(load).toMatchObject({ steps: [2, 3], counts: [2, 2, 3, 3] })
    expect(appendExpertLoad(load, 3, [9, 9], 2)).toBe(load)
    expect(appendExpertLoad(load, 4, [9], 2)).toBe(load)
    expect(appendPoints([[1, 1]], [[1, 5], [2, 2]])).toEqual([[1, 1], [2, 2]])
  })

  it('coalesces a burst into one flush', () => {
    vi.useFakeTimers()
    const flushes: number[][] = []
    const c = coalesce<number>((batch) => flushes.push(batch), 250)
    c.push(1)
    c.push(2)
    vi.advanceTimersByTime(249)
    expect(flushes).toEqual([])
    vi.advanceTimersByTime(1)
    c.push(3)
    c.flushNow()
    c.push(4)
    c.cancel()
    vi.advanceTimersByTime(1000)
    expect(flushes).toEqual([[1, 2], [3]])
  })
})
