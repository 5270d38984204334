// Answers kept by key with in-flight requests shared: asking twice for the same expert-load window
// (two components, or a scrub back and forth) costs one request.

export interface RequestCache<V> {
  get(key: string, fetch: () => Promise<V>): Promise<V>
  peek(key: string): V | undefined
  clear(): void
}

export function requestCache<V>(limit = 32): RequestCache<V> {
  const answers = new Map<string, V>()
  const pending = new Map<string, Promise<V>>()
  return {
    get(key, fetch) {
      const answer = answers.get(key)
      if (answer !== undefined) {
        answers.delete(key)
        answers.set(key, answer)
        return Promise.resolve(answer)
      }
      let request = pending.get(key)
      if (!request) {
        request = fetch().then(
          (value) => {
            pending.delete(key)
            answers.set(key, value)
            if (answers.size > limit) answers.delete(answers.keys().next().value as string)
            return value
          },
          (error: unknown) => {
            pending.delete(key)
            throw error
          },
        )
        pending.set(key, request)
      }
      return request
    },
    peek: (key) => answers.get(key),
    clear() {
      answers.clear()
      pending.clear()
    },
  }
}
