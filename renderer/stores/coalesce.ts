// Live events can arrive far faster than a chart should redraw. A coalescer buffers them and hands
// the batch over at most once per interval (250 ms: ≤ 4 renders a second).
export interface Coalescer<T> {
  push(item: T): void
  flushNow(): void
  cancel(): void
}

export function coalesce<T>(flush: (batch: T[]) => void, intervalMs = 250): Coalescer<T> {
  let pending: T[] = []
  let timer: ReturnType<typeof setTimeout> | undefined
  const flushNow = () => {
    if (timer !== undefined) clearTimeout(timer)
    timer = undefined
    if (pending.length === 0) return
    const batch = pending
    pending = []
    flush(batch)
  }
  return {
    push(item) {
      pending.push(item)
      timer ??= setTimeout(flushNow, intervalMs)
    },
    flushNow,
    cancel() {
      if (timer !== undefined) clearTimeout(timer)
      timer = undefined
      pending = []
    },
  }
}
