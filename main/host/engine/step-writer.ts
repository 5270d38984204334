// Writes decoded step records to the store: the steps that arrive together (the engine ran ahead
// while JS was busy) go in one transaction, and never more than one transaction per step.
import type { StepTelemetry } from '../store/types'

export interface StepAppender {
  appendSteps(runId: string, records: readonly StepTelemetry[], wallTimes: readonly number[]): void
}

export class StepWriter {
  private records: StepTelemetry[] = []
  private wallTimes: number[] = []
  private scheduled = false

  constructor(
    private readonly store: StepAppender,
    private readonly runId: string,
    private readonly onError: (e: Error) => void,
  ) {}

  push(record: StepTelemetry, wallTime: number): void {
    this.records.push(record)
    this.wallTimes.push(wallTime)
    if (this.scheduled) return
    this.scheduled = true
    setImmediate(() => {
      this.scheduled = false
      try {
        this.flush()
      } catch (e) {
        this.onError(e as Error)
      }
    })
  }

  /** Writes what is pending now (throws what the store throws). */
  flush(): void {
    if (this.records.length === 0) return
    const records = this.records
    const wallTimes = this.wallTimes
    this.records = []
    this.wallTimes = []
    this.store.appendSteps(this.runId, records, wallTimes)
  }
}
