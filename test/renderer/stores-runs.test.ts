// The runs store: list + live updates, loss sparklines, run actions; and the table's filter/sort.
import { createPinia, setActivePinia } from 'pinia'
import { beforeEach, describe, expect, it } from 'vitest'

import { useRunsStore } from '../../renderer/stores/runs'
import { actionsFor } from '../../renderer/stores/run-actions'
import { formatStarted, matchesFilter, sortRuns } from '../../renderer/stores/runs-table'
import { stepEvent, summary } from '../unit/contract-fixtures'
import { fakeClient, flushPromises } from './stores-fake-client'

beforeEach(() => setActivePinia(createPinia()))

describe('runs store', () => {
  it('loads the list and a loss sparkline per run that has steps, then extends it live', async () => {
    const client = fakeClient({
      'runs.list': async () => [summary({ id: 'a', step: 2 }), summary({ id: 'b', step: 0, lastLoss: null })],
      'metrics.series': async ({ maxPoints }) => ({ step: [1, 2], wallTime: [1, 2], values: { loss: [3, maxPoints] } }),
    })
    const store = useRunsStore()
    const stop = store.follow(client)
    await flushPromises()
    await flushPromises()
    expect(store.runs.map((r) => r.id).sort()).toEqual(['a', 'b'])
    expect(store.sparklines['a']).toEqual([[1, 3], [2, 50]]) // asked for ~50 points
    expect(store.sparklines['b']).toBeUndefined()
    client.emit('run.step', stepEvent('a', 3, 2.5))
    expect(store.byId['a']).toMatchObject({ step: 3, lastLoss: 2.5 })
    expect(store.sparklines['a']!.at(-1)).toEqual([3, 2.5])
    stop()
  })

  it('sends each action to the host, tracks it as busy, and drops a deleted run for good', async () => {
    const client = fakeClient({ 'runs.list': async () => [summary({ id: 'a' })] })
    const store = useRunsStore()
    await store.refresh(client)
    const pausing = store.act('pause', 'a', client)
    expect(store.busy['a']).toBe('pause')
    await pausing
    expect(store.busy['a']).toBeUndefined()
    expect(client.calls('runs.pause')).toEqual([{ id: 'a' }])

    await store.act('restart', 'a', client)
    expect(store.byId['a']!.status).toBe('queued')

    await store.act('delete', 'a', client)
    expect(store.byId['a']).toBeUndefined()
    store.applyStatus(summary({ id: 'a', status: 'failed' })) // its engine's last words
    expect(store.byId['a']).toBeUndefined()
  })

  it('keeps an action failure for the caller and clears busy', async () => {
    const client = fakeClient({ 'runs.stop': async () => Promise.reject(new Error('run a is finished')) })
    const store = useRunsStore()
    await expect(store.act('stop', 'a', client)).rejects.toThrow('finished')
    expect(store.busy['a']).toBeUndefined()
  })
})

describe('run actions by status', () => {
  it('offers what the run manager accepts', () => {
    expect(actionsFor('running')).toEqual(['pause', 'stop', 'checkpoint', 'delete'])
    expect(actionsFor('paused')).toContain('resume')
    expect(actionsFor('failed')).toContain('restart')
    expect(actionsFor('finished')).toEqual(['delete'])
  })
})

describe('runs table', () => {
  const runs = [
    summary({ id: 'a', name: 'baseline', status: 'finished', lastLoss: 2, createdAt: 1, startedAt: 10 }),
    summary({ id: 'b', name: 'offload', status: 'running', lastLoss: null, createdAt: 2, startedAt: 20, strategy: 'host offload' }),
    summary({ id: 'c', name: 'pinning', status: 'paused', lastLoss: 1, createdAt: 3, startedAt: null }),
  ]

  it('filters by text over name, model and strategy, and by status', () => {
    const pick = (text: string, status: Parameters<typeof matchesFilter>[1]['status'] = 'all') =>
      runs.filter((r) => matchesFilter(r, { text, status })).map((r) => r.id)
    expect(pick('OFFLOAD')).toEqual(['b'])
    expect(pick('mixtral')).toEqual(['a', 'b', 'c'])
    expect(pick('', 'active')).toEqual(['b', 'c'])
    expect(pick('', 'finished')).toEqual(['a'])
  })

  it('sorts by any column either way, runs without a value last', () => {
    expect(sortRuns(runs, 'loss', 'ascending').map((r) => r.id)).toEqual(['c', 'a', 'b'])
    expect(sortRuns(runs, 'loss', 'descending').map((r) => r.id)).toEqual(['a', 'c', 'b'])
    expect(sortRuns(runs, 'name', 'ascending').map((r) => r.id)).toEqual(['a', 'b', 'c'])
    expect(sortRuns(runs, 'startedAt', 'descending').map((r) => r.id)).toEqual(['b', 'a', 'c'])
  })

  it('says when a run started in words', () => {
    expect(formatStarted(null)).toBe('—')
    expect(formatStarted(1_000, 31_000)).toBe('just now')
    expect(formatStarted(0, 5 * 60_000)).toBe('5 min ago')
  })
})
