// Follows one run through the host's events until it ends: progress per step, its log events on
// their own lines, and the first Ctrl-C asks the run to stop (it saves a checkpoint); a second one
// gives up waiting.
import type { EventName, EventPayload, RunSummary } from '../api/contract'
import type { Host } from '../host/host'
import type { CliContext } from './context'
import { Progress } from './progress'

const ENDED = new Set(['finished', 'failed', 'stopped'])

type Received = { [E in EventName]: { name: E; payload: EventPayload<E> } }[EventName]

export class RunFollower {
  private id: string | null = null
  private early: Received[] = []
  private progress: Progress | null = null
  private settle: ((s: RunSummary) => void) | null = null
  private readonly unsubscribe: () => void

  // Subscribes at once, so events sent while the run is being created are not lost.
  constructor(
    private readonly host: Host,
    private readonly ctx: CliContext,
  ) {
    this.unsubscribe = host.onEvent((name, payload) => this.receive({ name, payload } as Received))
  }

  /** prefix: put before each progress line (a set's "[2/5] "). */
  async follow(run: RunSummary, prefix = ''): Promise<RunSummary> {
    this.id = run.id
    this.progress = new Progress(this.ctx.out, run.totalSteps, Date.now, prefix)
    let interrupts = 0
    const stopListening = this.ctx.onInterrupt(() => {
      interrupts++
      if (interrupts === 1) {
        this.line(`stopping ${run.id} at the next step (it saves a checkpoint); Ctrl-C again to stop waiting`)
        try {
          this.host.runs.stop(run.id)
        } catch (e) {
          this.line(`cannot stop: ${(e as Error).message}`)
        }
      } else {
        const current = this.host.store.getRun(run.id)
        this.settle?.({ ...run, status: current?.status ?? run.status, error: 'interrupted while waiting for the run to stop' })
      }
    })
    try {
      return await new Promise<RunSummary>((resolve) => {
        this.settle = resolve
        for (const e of this.early.splice(0)) this.receive(e)
        if (ENDED.has(run.status)) resolve(run)
      })
    } finally {
      stopListening()
      this.unsubscribe()
      this.progress?.finish()
    }
  }

  private receive(e: Received): void {
    if (this.id === null) {
      this.early.push(e)
      return
    }
    switch (e.name) {
      case 'run.step':
        if (e.payload.id === this.id) this.progress?.step(e.payload.metrics)
        break
      case 'run.event':
        if (e.payload.runId === this.id && e.payload.kind !== 'queued' && !ENDED.has(e.payload.kind)) {
          this.line(e.payload.message)
          if (e.payload.kind === 'paused' && e.payload.message.startsWith('diverged'))
            this.line('the run is paused: Ctrl-C stops it; or look at it with `moe-workbench serve` and resume or restart it there')
        }
        break
      case 'run.status':
        if (e.payload.id === this.id && ENDED.has(e.payload.status)) this.settle?.(e.payload)
        break
    }
  }

  private line(text: string): void {
    this.progress?.finish()
    this.ctx.out.write(`${text}\n`)
  }
}
