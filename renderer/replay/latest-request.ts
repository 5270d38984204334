// Fetches by key where only the newest wish matters (the current step while scrubbing). Keys asked for
// while one is being fetched collapse into the latest (the ones in between are never requested);
// answers are kept in a small LRU and delivered only if their key is still the one wanted. A few
// keys ahead can be fetched in the background (prefetch), so stepping forward finds them cached.

export interface LatestRequester<K, V> {
  /** Asks for key; the answer comes through onAnswer (synchronously when cached). */
  want(key: K): void
  /** A cached answer, without asking. */
  peek(key: K): V | undefined
  /** Fetches key into the cache in the background, when fewer than maxPrefetch fetches are out. */
  warm(key: K): void
  readonly inFlight: number
}

export function latestRequester<K, V>(options: {
  fetch: (key: K) => Promise<V>
  onAnswer: (key: K, value: V) => void
  onError: (key: K, error: unknown) => void
  cacheSize?: number
  maxPrefetch?: number
}): LatestRequester<K, V> {
  const cache = new Map<K, V>()
  const limit = options.cacheSize ?? 64
  const maxPrefetch = options.maxPrefetch ?? 2
  const running = new Set<K>()
  let wanted: K | undefined
  let delivered: K | undefined
  let wantInFlight = false // a fetch for a wanted key is out: later wants wait for it, then take the latest

  function remember(key: K, value: V): void {
    cache.delete(key)
    cache.set(key, value)
    if (cache.size > limit) cache.delete(cache.keys().next().value as K)
  }

  function deliver(key: K, value: V): void {
    delivered = key
    options.onAnswer(key, value)
  }

  function start(key: K, forWant: boolean): void {
    running.add(key)
    if (forWant) wantInFlight = true
    options.fetch(key).then(
      (value) => {
        remember(key, value)
        settle(key, forWant, () => deliver(key, value))
      },
      (error: unknown) => settle(key, forWant, () => options.onError(key, error)),
    )
  }

  function settle(key: K, forWant: boolean, answer: () => void): void {
    running.delete(key)
    if (forWant) wantInFlight = false
    if (wanted === key && delivered !== key) return answer()
    if (wanted === undefined || delivered === wanted || running.has(wanted)) return
    const cached = cache.get(wanted)
    if (cached !== undefined) deliver(wanted, cached)
    else if (!wantInFlight) start(wanted, true)
  }

  return {
    want(key) {
      wanted = key
      const cached = cache.get(key)
      if (cached !== undefined) {
        remember(key, cached)
        deliver(key, cached)
      } else if (!running.has(key) && !wantInFlight) start(key, true)
    },
    peek: (key) => cache.get(key),
    warm(key) {
      if (!running.has(key) && !cache.has(key) && running.size < maxPrefetch + 1) start(key, false)
    },
    get inFlight() {
      return running.size
    },
  }
}
