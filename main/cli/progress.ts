// Training progress: a redrawn bar on a terminal, plain lines (at most one a second) otherwise.
import type { StepMetrics } from '../api/contract'
import { formatDuration, formatLoss, formatRate } from './format'

const BAR_WIDTH = 24
const LINE_INTERVAL_MS = 1000
// Step events the ETA averages over: recent enough to follow changes, long enough to be calm. Live events are
// throttled, so one event may stand for many steps: the rate is steps spanned over time taken, never per event.
const ETA_WINDOW = 20

export interface ProgressOutput {
  isTTY?: boolean
  columns?: number
  write(text: string): unknown
}

export class Progress {
  private readonly seen: { at: number; step: number }[] = []
  private lastLine = 0
  private drawn = false

  constructor(
    private readonly out: ProgressOutput,
    private readonly totalSteps: number,
    private readonly now: () => number = Date.now,
    /** Put before every line (a set's "[2/5] "). */
    private readonly prefix = '',
  ) {}

  step(m: StepMetrics): void {
    const t = this.now()
    this.seen.push({ at: t, step: m.step })
    if (this.seen.length > ETA_WINDOW + 1) this.seen.shift()
    const stats = `${this.prefix}step ${m.step}/${this.totalSteps} | loss ${formatLoss(m.loss)} | ${formatRate(m.tokens_per_s)} tok/s | ETA ${formatDuration(this.eta(m.step))}`
    if (this.out.isTTY) {
      const filled = this.totalSteps > 0 ? Math.round((BAR_WIDTH * Math.min(m.step, this.totalSteps)) / this.totalSteps) : 0
      const bar = `[${'#'.repeat(filled)}${'.'.repeat(BAR_WIDTH - filled)}] `
      const line = `${bar}${stats}`.slice(0, Math.max(20, (this.out.columns || 120) - 1))
      this.out.write(`\r\x1b[2K${line}`)
      this.drawn = true
    } else if (t - this.lastLine >= LINE_INTERVAL_MS || m.step === 1 || m.step >= this.totalSteps) {
      this.out.write(`${stats}\n`)
      this.lastLine = t
    }
  }

  // Ends the redrawn line so later output starts on a fresh one.
  finish(): void {
    if (this.drawn) this.out.write('\n')
    this.drawn = false
  }

  private eta(step: number): number {
    const first = this.seen[0]
    const last = this.seen[this.seen.length - 1]
    if (!first || !last || last.step <= first.step) return NaN
    const perStep = (last.at - first.at) / (last.step - first.step)
    return Math.max(0, this.totalSteps - step) * perStep
  }
}
