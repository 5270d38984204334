// Coalesces live updates to at most one per interval: the first goes out at once, later ones within
// the interval are replaced by the newest, which goes out when the interval ends.
export class LiveThrottle<T> {
  private latest: T | undefined
  private lastSent = -Infinity
  private timer: NodeJS.Timeout | undefined

  constructor(
    private readonly intervalMs: number,
    private readonly send: (value: T) => void,
  ) {}

  push(value: T): void {
    this.latest = value
    if (this.timer) return
    const wait = this.lastSent + this.intervalMs - Date.now()
    if (wait <= 0) this.flush()
    else this.timer = setTimeout(() => this.flush(), wait)
  }

  /** Sends the pending value now, if any. */
  flush(): void {
    if (this.timer) clearTimeout(this.timer)
    this.timer = undefined
    if (this.latest === undefined) return
    const value = this.latest
    this.latest = undefined
    this.lastSent = Date.now()
    this.send(value)
  }
}
