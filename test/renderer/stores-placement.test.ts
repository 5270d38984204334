// The placement store behind Replay's device charts, against a fake host: nothing asked of a run whose experts
// run inside the MoE layers (one device, no pipeline), a pipelined device read like several, each layer's series
// read once over the run, and a late answer for an earlier run or layer dropped.
import { createPinia, setActivePinia } from 'pinia'
import { beforeEach, describe, expect, it } from 'vitest'

import { PipelineConfigSchema, PlacementConfigSchema } from '../../main/api/config'
import type { PlacementSeries } from '../../main/api/contract'
import { PLACEMENT_POINTS, usePlacementStore } from '../../renderer/stores/placement'
import { fakeClient } from './stores-fake-client'

beforeEach(() => setActivePinia(createPinia()))

const leastLoaded = PlacementConfigSchema.parse({ devices: 4, policy: 'least-loaded' })
const seriesOf = (layer: number): PlacementSeries => ({
  layer, steps: [1, 2], imbalanceBefore: [2, 2.5], imbalanceAfter: [1.1, 1.2], spilledTokens: [40, 50], movedExperts: [1, 2],
  criticalMs: [null, 3.5], predictedMs: [null, 4],
})

describe('placement store', () => {
  it('asks nothing for a run on one device, or without a placement section', async () => {
    const client = fakeClient()
    const store = usePlacementStore()
    store.open('run-1', { placement: PlacementConfigSchema.parse({ devices: 1, policy: 'greedy' }) }, client)
    await store.showLayer(0, 30)
    store.open('run-1', { placement: PlacementConfigSchema.parse({ devices: 1 }), pipeline: PipelineConfigSchema.parse({ partitions: 1 }) }, client)
    await store.showLayer(0, 30)
    store.open('run-1', {}, client)
    await store.showLayer(0, 30)
    store.open('run-1', undefined, client)
    await store.showLayer(0, 30)
    expect(store.settings).toBeNull()
    expect(store.series).toBeNull()
    expect(client.calls('metrics.placement')).toEqual([])
  })

  it('reads the series of one pipelined device too, with the placement defaults when the run has no section', async () => {
    const client = fakeClient({ 'metrics.placement': async ({ layer }) => seriesOf(layer) })
    const store = usePlacementStore()
    store.open('run-1', { pipeline: PipelineConfigSchema.parse({ partitions: 4 }) }, client)
    expect(store.settings).toEqual(PlacementConfigSchema.parse({}))
    await store.showLayer(0, 30)
    expect(store.series).toEqual(seriesOf(0))
    const budgeted = PlacementConfigSchema.parse({ devices: 1, device_budget_bytes: 2 ** 30 })
    store.open('run-2', { placement: budgeted, pipeline: PipelineConfigSchema.parse({ memory_reuse: 'S3' }) }, client)
    expect(store.settings).toEqual(budgeted)
  })

  it('reads each layer’s series over the whole run once', async () => {
    const client = fakeClient({ 'metrics.placement': async ({ layer }) => seriesOf(layer) })
    const store = usePlacementStore()
    store.open('run-1', { placement: leastLoaded }, client)
    expect(store.settings).toEqual(leastLoaded)
    await store.showLayer(1, 30)
    expect(store.series).toEqual(seriesOf(1))
    await store.showLayer(0, 30)
    await store.showLayer(1, 30)
    expect(store.series?.layer).toBe(1)
    expect(client.calls('metrics.placement')).toEqual([
      { id: 'run-1', layer: 1, fromStep: 1, toStep: 30, maxPoints: PLACEMENT_POINTS },
      { id: 'run-1', layer: 0, fromStep: 1, toStep: 30, maxPoints: PLACEMENT_POINTS },
    ])
  })

  it('drops a late answer for an earlier layer or run, and keeps the error of the wanted one', async () => {
    const pending: ((s: PlacementSeries) => void)[] = []
    const client = fakeClient({ 'metrics.placement': ({ layer }) => new Promise((resolve) => pending.push(() => resolve(seriesOf(layer)))) })
    const store = usePlacementStore()
    store.open('run-1', { placement: leastLoaded }, client)
    const first = store.showLayer(0, 30)
    const second = store.showLayer(1, 30)
    pending[1]!(seriesOf(1))
    await second
    pending[0]!(seriesOf(0))
    await first
    expect(store.series?.layer).toBe(1)

    const stale = store.showLayer(2, 30)
    store.open('run-2', { placement: leastLoaded }, client)
    pending[2]!(seriesOf(2))
    await stale
    expect(store.series).toBeNull()

    const failing = fakeClient({ 'metrics.placement': async () => Promise.reject(new Error('run run-2: layer 9 is out of range (2 MoE layers)')) })
    store.open('run-2', { placement: leastLoaded }, failing)
    await store.showLayer(9, 30)
    expect(store.error).toBe('run run-2: layer 9 is out of range (2 MoE layers)')
  })
})
