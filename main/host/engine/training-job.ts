// The engine process's one job: train a run with the native engine, write every step to the store,
// and keep the host informed (live steps at most ~10 per second, checkpoints, the outcome).
import { existsSync, readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'

import { TelemetryStore } from '../store/store'
import { loadEngineAddon, type NativeEngine, type TrainOutcome } from './addon'
import { LiveThrottle } from './live-throttle'
import type { ParentChannel } from './parent-channel'
import { decodeStepRecord, type EngineStepRecord } from './step-record'
import { StepWriter } from './step-writer'
import { WORKER_EXIT, type LiveStep, type StartTraining, type ToWorker } from './worker-protocol'

const LIVE_INTERVAL_MS = 100

function directoryBytes(dir: string): number {
  return readdirSync(dir, { withFileTypes: true })
    .map((entry) => (entry.isFile() ? statSync(join(dir, entry.name)).size : 0))
    .reduce((a, b) => a + b, 0)
}

function liveStep(record: EngineStepRecord, wallTime: number): LiveStep {
  const { expertTokens, ...scalars } = record
  return { ...scalars, wallTime, expertTokens: expertTokens.map((layer) => Array.from(layer)) }
}

export class TrainingJob {
  private engine: NativeEngine | undefined
  private store: TelemetryStore | undefined
  private writer: StepWriter | undefined
  private live: LiveThrottle<{ record: EngineStepRecord; wallTime: number }> | undefined
  private runId = ''
  private step = 0
  private failure: string | undefined
  private ending = false

  constructor(
    private readonly parent: ParentChannel,
    private readonly exit: (code: number) => void = (code) => process.exit(code),
  ) {}

  handle(msg: ToWorker): void {
    if (msg.type === 'start') return this.start(msg)
    const engine = this.engine
    if (msg.type === 'stop') {
      if (engine?.training) engine.stop()
      else if (!engine) void this.end('stopped')
      return
    }
    if (!engine?.training) return
    if (msg.type === 'pause') engine.pause()
    else if (msg.type === 'resume') engine.resume()
    else engine.requestCheckpoint()
  }

  /** An error nothing else caught: report it and end the process. */
  crash(e: unknown): void {
    this.failure ??= e instanceof Error ? e.message : String(e)
    if (this.engine?.training) this.engine.stop()
    else void this.end('failed')
  }

  private start(msg: StartTraining): void {
    if (this.engine || this.ending) return
    this.runId = msg.runId
    try {
      const store = TelemetryStore.open(msg.dbPath)
      this.store = store
      // The run's weights come from the folder it resumes or starts from, loaded as the engine opens.
      const load = msg.resumeDir ? { dir: msg.resumeDir, resume: true } : msg.initDir ? { dir: msg.initDir } : undefined
      const engine = new (loadEngineAddon().Engine)(msg.configJson, msg.initDir, msg.runDir, load)
      engine.setData(msg.dataPath)
      if (msg.evalPath) engine.setEvalData(msg.evalPath)
      this.step = engine.stepCount
      this.writer = new StepWriter(store, msg.runId, (e) => this.crash(e))
      this.live = new LiveThrottle(LIVE_INTERVAL_MS, ({ record, wallTime }) =>
        this.parent.post({ type: 'step', record: liveStep(record, wallTime) }),
      )
      this.engine = engine
      this.parent.post({
        type: 'started', step: engine.stepCount, numParams: engine.numParams, backend: engine.backendName,
        backendDescription: engine.backendDescription,
      })
      engine.start(
        { totalSteps: msg.totalSteps ?? 0 },
        (buf) => this.onStep(buf),
        (step, dir) => this.onCheckpoint(step, dir),
        (status, error) => void this.end(status, error),
        (step, message) => {
          this.writer?.flush()  // the diverged step is stored before it is reported
          this.parent.post({ type: 'nonfinite', step, message })
        },
      )
    } catch (e) {
      this.crash(e)
    }
  }

  private onStep(buf: ArrayBuffer): void {
    const wallTime = Date.now()
    const record = decodeStepRecord(buf)
    this.step = record.step
    this.writer?.push(record, wallTime)
    this.live?.push({ record, wallTime })
  }

  private onCheckpoint(step: number, dir: string): void {
    // Steps up to the checkpoint are durable before the checkpoint is recorded.
    this.writer?.flush()
    this.store?.addCheckpoint({ runId: this.runId, step, path: dir, createdAt: Date.now(), bytes: directoryBytes(dir) })
    // The engine removes the oldest after a save where train.keep_checkpoints says so: their records go with them.
    for (const c of this.store?.listCheckpoints(this.runId) ?? [])
      if (c.step !== step && !existsSync(c.path)) this.store?.removeCheckpoint(this.runId, c.step)
    this.parent.post({ type: 'checkpoint', step, dir })
  }

  private async end(status: TrainOutcome, engineError?: string): Promise<void> {
    if (this.ending) return
    this.ending = true
    try {
      this.writer?.flush()
    } catch (e) {
      this.failure ??= (e as Error).message
    }
    this.live?.flush()
    this.store?.close()
    const error = this.failure ?? engineError
    if (status === 'failed' || error !== undefined)
      this.parent.post({ type: 'failed', error: error ?? 'the engine failed without a message', step: this.step })
    else this.parent.post({ type: 'done', status, step: this.step })
    await this.parent.flushed()
    this.exit(status === 'failed' || error !== undefined ? WORKER_EXIT.failed : WORKER_EXIT.ok)
  }
}
