// The Compare store against a fake client: it reads each run's detail, series, last-steps loss and
// plan; a failing run is reported without hiding the others.
import { createPinia, setActivePinia } from 'pinia'
import { beforeEach, describe, expect, it } from 'vitest'

import { parseIds, useCompareStore } from '../../renderer/stores/compare'
import { detailOf, fakeClient, planOf } from './compare-fixtures'

beforeEach(() => setActivePinia(createPinia()))

const series = (n: number) => ({ step: [n], wallTime: [n * 1000], values: { loss: [2], tokens_per_s: [100] } })

describe('compare store', () => {
  it('parses ids from the query, without blanks or repeats', () => {
    expect(parseIds('a, b,,a')).toEqual(['a', 'b'])
    expect(parseIds(undefined)).toEqual([])
  })

  it('loads every selected run, keeps selection order and reports failures per run', async () => {
    const fake = fakeClient({
      'runs.get': async ({ id }) => {
        if (id === 'gone') throw new Error('no run "gone"')
        return detailOf(id, { step: 25 })
      },
      'metrics.series': async ({ fromStep }) => series(fromStep ?? 1),
      'planner.plan': async () => planOf(3 * 2 ** 20),
    })
    const compare = useCompareStore()
    compare.select(['b', 'gone', 'a'])
    await compare.load(fake)
    expect(compare.loaded.map((r) => r.detail.summary.id)).toEqual(['b', 'a'])
    expect(compare.errors).toEqual({ gone: 'no run "gone"' })
    expect(compare.baseline).toBe('b')
    const tailCall = fake.calls.find((c) => c.name === 'metrics.series' && (c.params as { fromStep?: number }).fromStep !== undefined)
    expect(tailCall?.params).toMatchObject({ id: 'b', metrics: ['loss'], fromStep: 16 })
    expect(compare.runs['a']!.plan?.tiers[0]!.total).toBe(3 * 2 ** 20)
  })

  it('keeps a run without a plan when the planner fails', async () => {
    const fake = fakeClient({
      'runs.get': async ({ id }) => detailOf(id, { step: 0 }),
      'metrics.series': async () => ({ step: [], wallTime: [], values: {} }),
      'planner.plan': async () => Promise.reject(new Error('planner down')),
    })
    const compare = useCompareStore()
    compare.select(['a'])
    await compare.load(fake)
    expect(compare.runs['a']).toMatchObject({ plan: null, tailLoss: [] })
  })
})
