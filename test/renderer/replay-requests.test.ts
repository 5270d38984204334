// The replay's request coalescing: only the latest wanted step is fetched after the one in flight,
// prefetches fill the cache, and shared expert-load requests are made once.
import { describe, expect, it } from 'vitest'

import { latestRequester } from '../../renderer/replay/latest-request'
import { requestCache } from '../../renderer/replay/request-cache'

function deferredFetcher() {
  const calls: { key: number; resolve: (v: string) => void; reject: (e: Error) => void }[] = []
  const fetch = (key: number) => new Promise<string>((resolve, reject) => calls.push({ key, resolve, reject }))
  return { calls, fetch }
}
const flush = () => new Promise((r) => setTimeout(r, 0))

describe('latest requester', () => {
  it('collapses wants made during a fetch into the latest one', async () => {
    const { calls, fetch } = deferredFetcher()
    const answers: [number, string][] = []
    const r = latestRequester<number, string>({ fetch, onAnswer: (k, v) => answers.push([k, v]), onError: () => {} })
    r.want(1)
    r.want(2)
    r.want(3)
    expect(calls.map((c) => c.key)).toEqual([1])
    calls[0]!.resolve('one')
    await flush()
    expect(calls.map((c) => c.key)).toEqual([1, 3])
    calls[1]!.resolve('three')
    await flush()
    expect(answers).toEqual([[3, 'three']])
  })

  it('answers from the cache synchronously and uses prefetched keys', async () => {
    const { calls, fetch } = deferredFetcher()
    const answers: number[] = []
    const r = latestRequester<number, string>({ fetch, onAnswer: (k) => answers.push(k), onError: () => {}, maxPrefetch: 2 })
    r.want(1)
    r.warm(2)
    r.warm(3)
    r.warm(4) // over the prefetch limit
    expect(calls.map((c) => c.key)).toEqual([1, 2, 3])
    calls.forEach((c) => c.resolve(`v${c.key}`))
    await flush()
    expect(answers).toEqual([1])
    r.want(2)
    expect(answers).toEqual([1, 2])
    expect(r.peek(3)).toBe('v3')
    expect(r.inFlight).toBe(0)
  })

  it('reports a failure of the wanted key', async () => {
    const { calls, fetch } = deferredFetcher()
    const errors: number[] = []
    const r = latestRequester<number, string>({ fetch, onAnswer: () => {}, onError: (k) => errors.push(k) })
    r.want(7)
    calls[0]!.reject(new Error('gone'))
    await flush()
    expect(errors).toEqual([7])
  })
})

describe('request cache', () => {
  it('shares an in-flight request and keeps the answer', async () => {
    const cache = requestCache<number>()
    let fetches = 0
    const fetch = () => Promise.resolve(++fetches)
    const [a, b] = await Promise.all([cache.get('k', fetch), cache.get('k', fetch)])
    expect([a, b, fetches]).toEqual([1, 1, 1])
    expect(await cache.get('k', fetch)).toBe(1)
    expect(cache.peek('k')).toBe(1)
  })

  it('forgets failures so a later ask retries', async () => {
    const cache = requestCache<number>()
    await expect(cache.get('k', () => Promise.reject(new Error('no')))).rejects.toThrow('no')
    expect(await cache.get('k', () => Promise.resolve(2))).toBe(2)
  })
})
