// Runs from creation to their end: a queue (one run at a time by default), one engine process per
// run, and supervision. A process that crashes, aborts or is killed fails its run with the reason;
// the host stays up and the next queued run starts.
import { existsSync } from 'node:fs'
import { rm } from 'node:fs/promises'
import os from 'node:os'
import { dirname, isAbsolute, join, relative, resolve } from 'node:path'

import { ApiInputError, RunSpecSchema, issuesOf } from '../../api/contract'
import type { Checkpoint, EventSink, RunEvent, RunSpec, RunStatus, RunSummary } from '../../api/contract'
import type { DatasetSpec, PrepareOptions, PreparedDataset } from '../datasets/prepare'
import type { EngineExit, EnginePort, EnginePortFactory } from '../engine/port'
import type { FromWorker } from '../engine/worker-protocol'
import type { Budgets } from '../planner/plan'
import { resolveOffload } from '../planner/resolve'
import { expertSharesFromEngine, measureJob, runMeasureWorker, type RunMeasure } from '../measure-experts'
import { verifyCheckpoint } from '../checkpoint-verify'
import { toRunSummary } from '../run-summary'
import type { RunRecord } from '../store/types'
import { engineConfigJson } from './engine-config'
import { liveStepEvent } from './live-step-event'
import { RunStateError } from './run-errors'
import { newRunId } from './run-id'
import { runOutcome, type WorkerReport } from './run-outcome'
import { claimRun, heartbeat, ownedByAnotherLiveHost, ownerOf, releaseRun } from './run-owner'

/** The part of the TelemetryStore the run manager uses. */
export interface RunStore {
  insertRun(r: RunRecord): void
  updateRun(id: string, patch: Partial<Omit<RunRecord, 'id'>>): void
  getRun(id: string): RunRecord | undefined
  listRuns(): RunRecord[]
  deleteRun(id: string): void
  addEvent(e: RunEvent): void
  listCheckpoints(runId: string): Checkpoint[]
  truncateSteps(runId: string, afterStep: number): void
}

export interface RunManagerOptions {
  store: RunStore
  /** Each run's checkpoints go to runsDir/<id>. */
  runsDir: string
  /** The database the engine processes write steps to (the store's file). */
  dbPath: string
  /** Where prepared token shards are cached; default: "cache" beside runsDir. */
  cacheDir?: string
  /** Runs trained at once; default 1. */
  concurrency?: number
  portFactory: EnginePortFactory
  /** The built engine-worker.js. */
  workerEntry: string
  prepareDataset: (spec: DatasetSpec, cacheDir: string, options?: PrepareOptions) => Promise<PreparedDataset>
  emit: EventSink
  /** What this machine offers the planner, which settles each new run's offload; default: its memory, no disk limit. */
  budgets?: () => Budgets
  /** ESFT's measurement before a run whose finetune section chooses no experts; default: the engine on a worker thread. */
  measure?: RunMeasure
  /** How often this host renews the heartbeat on the runs it owns (and looks at other hosts'); default 2 s. */
  heartbeatMs?: number
  /** A heartbeat older than this means its host (on another machine) is gone; default 30 s. */
  staleMs?: number
}

interface QueuedRun {
  id: string
  resumeDir?: string
}

interface ActiveRun extends WorkerReport {
  id: string
  port?: EnginePort // absent while the dataset is prepared
  paused: boolean
  stopRequested: boolean
  deleting: boolean
  ended: Promise<void>
  markEnded: () => void
}

const ACTIVE: readonly RunStatus[] = ['running', 'paused', 'stopping']
const RESTARTABLE: readonly RunStatus[] = ['stopped', 'failed']
const messageOf = (e: unknown) => (e instanceof Error ? e.message : String(e))

export class RunManager {
  private readonly store: RunStore
  private readonly concurrency: number
  private readonly cacheDir: string
  private queue: QueuedRun[] = []
  private readonly active = new Map<string, ActiveRun>()
  private closed = false
  private watchTimer: NodeJS.Timeout | undefined
  // Active runs of other hosts seen without an owner file: failed when still so at the next look (a host
  // removes the file as it records the run's end, so one look may fall between the two).
  private readonly unowned = new Set<string>()

  constructor(private readonly options: RunManagerOptions) {
    this.store = options.store
    this.concurrency = Math.max(1, Math.floor(options.concurrency ?? 1))
    this.cacheDir = options.cacheDir ?? join(dirname(resolve(options.runsDir)), 'cache')
  }

  /** Records the run as queued and schedules it. */
  create(spec: RunSpec): RunSummary {
    this.requireOpen()
    const parsed = RunSpecSchema.safeParse(spec)
    if (!parsed.success) throw new ApiInputError('runs.create', issuesOf(parsed.error))
    const s = parsed.data
    const offload = resolveOffload(s.config, this.options.budgets?.() ?? { device: os.totalmem(), host: os.totalmem(), ssd: null })
    const id = newRunId(s.name, (candidate) => this.store.getRun(candidate) !== undefined)
    this.store.insertRun({
      id,
      name: s.name,
      status: 'queued',
      config: s.config,
      dataset: s.dataset,
      init: s.init ?? null,
      offload,
      runDir: join(resolve(this.options.runsDir), id),
      createdAt: Date.now(),
      startedAt: null,
      finishedAt: null,
      step: 0,
      totalSteps: s.config.train.steps,
      lastLoss: null,
      tokensPerSec: null,
      error: null,
      expertShares: s.expertShares ?? null,
    })
    this.publish(id)
    this.event(id, 'queued', 'queued')
    this.enqueue({ id })
    return this.summary(id)
  }

  pause(id: string): void {
    const run = this.activeIn(id, ['running'], 'paused')
    run.paused = true
    run.port?.send({ type: 'pause' })
    this.setStatus(id, 'paused')
    this.event(id, 'paused', `paused at step ${run.step}`)
  }

  resume(id: string): void {
    const run = this.activeIn(id, ['paused'], 'resumed')
    run.paused = false
    run.port?.send({ type: 'resume' })
    this.setStatus(id, 'running')
    this.event(id, 'resumed', `resumed at step ${run.step}`)
  }

  /** A queued run leaves the queue; a running or paused one stops at its next step boundary (saving a checkpoint). */
  stop(id: string): void {
    const record = this.requireRun(id)
    if (record.status === 'queued' && this.queue.some((q) => q.id === id)) {
      this.queue = this.queue.filter((q) => q.id !== id)
      this.setStatus(id, 'stopped', { finishedAt: Date.now() })
      this.event(id, 'stopped', 'stopped before it started')
      return
    }
    if (record.status === 'stopping') return
    const run = this.activeIn(id, ['running', 'paused'], 'stopped')
    run.stopRequested = true
    run.port?.send({ type: 'stop' })
    this.setStatus(id, 'stopping')
  }

  /** Saves a checkpoint at the next step boundary (also while paused). */
  requestCheckpoint(id: string): void {
    const run = this.activeIn(id, ['running', 'paused'], 'checkpointed')
    if (!run.port) throw new RunStateError(`run ${id} is still preparing its dataset; there is nothing to checkpoint yet`)
    run.port.send({ type: 'checkpoint' })
  }

  /** Continues a stopped or failed run from its latest checkpoint (or from scratch without one). */
  restart(id: string): RunSummary {
    this.requireOpen()
    const record = this.requireRun(id)
    if (!RESTARTABLE.includes(record.status))
      throw new RunStateError(`run ${id} is ${record.status}; only a stopped or failed run can be restarted`)
    const { job, step } = this.resumePoint(id)
    this.setStatus(id, 'queued', { finishedAt: null, error: null })
    const from = job.resumeDir ? `the checkpoint at step ${step}` : 'step 0 (no checkpoint)'
    this.event(id, 'queued', `restart from ${from}`)
    this.enqueue(job)
    return this.summary(id)
  }

  /** Removes the run, its telemetry and its run directory; an active run's engine is killed first. */
  async delete(id: string): Promise<void> {
    const record = this.requireRun(id)
    this.queue = this.queue.filter((q) => q.id !== id)
    const run = this.active.get(id)
    if (run) {
      run.deleting = true
      run.stopRequested = true
      run.port?.kill('SIGKILL')
      await run.ended
    }
    this.store.deleteRun(id)
    if (this.isInsideRunsDir(record.runDir)) await rm(record.runDir, { recursive: true, force: true })
  }

  /**
   * After a host restart: runs the previous host left active are failed (their engine died with it),
   * queued ones are queued again.
   */
  recover(): void {
    for (const record of this.store.listRuns().reverse()) {
      if (this.isOurs(record.id)) continue
      if (ownedByAnotherLiveHost(record.runDir, this.staleMs)) continue
      this.takeOver(record, `the host exited while the run was ${record.status}`, ` (at step ${record.step})`)
    }
  }

  // A run whose host is gone: an active one fails (message, with `detail` in its error), a queued one is ours.
  private takeOver(record: RunRecord, message: string, detail = ''): void {
    if (ACTIVE.includes(record.status)) {
      this.setStatus(record.id, 'failed', {
        finishedAt: Date.now(),
        error: `${message}${detail}; restart it to continue from its last checkpoint`,
      })
      this.event(record.id, 'failed', message)
    } else if (record.status === 'queued') this.enqueue(record.step > 0 ? this.resumePoint(record.id).job : { id: record.id })
  }

  /**
   * Keeps this host's heartbeat on the runs it owns; with watchOthers, also fails the active runs of hosts that
   * stopped answering (killed, crashed, their machine gone) and takes over their queued runs, so no run stays
   * "running" for ever because its host died while this one was up.
   */
  watch(watchOthers: boolean): void {
    if (this.watchTimer) return
    this.watchTimer = setInterval(() => {
      try {
        this.beat()
        if (watchOthers) this.failRunsOfGoneHosts()
      } catch (e) {
        process.emitWarning(`host watch: ${messageOf(e)}`)
      }
    }, this.options.heartbeatMs ?? 2_000)
    this.watchTimer.unref()
  }

  private get staleMs(): number {
    return this.options.staleMs ?? 30_000
  }

  private isOurs(id: string): boolean {
    return this.active.has(id) || this.queue.some((q) => q.id === id)
  }

  private beat(): void {
    const now = Date.now()
    for (const id of new Set([...this.active.keys(), ...this.queue.map((q) => q.id)])) {
      const record = this.store.getRun(id)
      if (record) heartbeat(record.runDir, now)
    }
  }

  private failRunsOfGoneHosts(): void {
    const seenUnowned = new Set<string>()
    for (const record of this.store.listRuns().reverse()) {
      if (this.isOurs(record.id) || !(ACTIVE.includes(record.status) || record.status === 'queued')) continue
      const owner = ownerOf(record.runDir, this.staleMs)
      if (owner.state === 'alive' || owner.state === 'self') continue
      if (owner.state === 'none') {
        seenUnowned.add(record.id)
        if (!this.unowned.has(record.id)) continue
      }
      const current = this.store.getRun(record.id)
      if (!current || this.isOurs(current.id)) continue
      const who = owner.state === 'gone' ? `the host (pid ${owner.owner.pid} on ${owner.owner.host})` : 'its host'
      this.takeOver(current, `${who} stopped answering at step ${current.step}`)
      if (!this.isOurs(current.id)) releaseRun(current.runDir)
    }
    this.unowned.clear()
    for (const id of seenUnowned) this.unowned.add(id)
  }

  /** Stops every active run (killing those that do not stop within graceMs); queued runs stay queued. */
  async shutdown(graceMs = 15_000): Promise<void> {
    this.closed = true
    if (this.watchTimer) clearInterval(this.watchTimer)
    const runs = [...this.active.values()]
    for (const run of runs) {
      run.stopRequested = true
      run.port?.send({ type: 'stop' })
    }
    const timeout = new Promise<void>((done) => setTimeout(done, graceMs).unref())
    await Promise.race([Promise.all(runs.map((r) => r.ended)), timeout])
    for (const run of this.active.values()) run.port?.kill('SIGKILL')
    await Promise.all(runs.map((r) => r.ended))
  }

  // Where a run continues: its newest checkpoint still complete on disk (the engine writes
  // trainer_state.json last) whose files match their checksums, or step 0; steps stored after that point are
  // dropped. Each newer checkpoint it passes over is named in the run's events with the reason.
  private resumePoint(id: string): { job: QueuedRun; step: number } {
    const complete = this.store.listCheckpoints(id).filter((c) => existsSync(join(c.path, 'trainer_state.json')))
    let checkpoint: Checkpoint | undefined
    for (const candidate of complete.reverse()) {
      const check = verifyCheckpoint(candidate.path)
      if (check.state !== 'corrupt') {
        checkpoint = candidate
        break
      }
      this.event(id, 'log', `skipped the checkpoint at step ${candidate.step}: ${check.reason}`)
    }
    const step = checkpoint?.step ?? 0
    this.store.truncateSteps(id, step)
    return { job: { id, resumeDir: checkpoint?.path }, step }
  }

  private enqueue(job: QueuedRun): void {
    const record = this.store.getRun(job.id)
    if (record) claimRun(record.runDir)
    this.queue.push(job)
    this.schedule()
  }

  private schedule(): void {
    while (!this.closed && this.active.size < this.concurrency && this.queue.length > 0)
      void this.launch(this.queue.shift() as QueuedRun)
  }

  private async launch(job: QueuedRun): Promise<void> {
    const record = this.store.getRun(job.id)
    if (!record) return
    let markEnded = () => {}
    const ended = new Promise<void>((done) => (markEnded = done))
    const run: ActiveRun = {
      id: job.id, step: record.step, paused: false, stopRequested: false, deleting: false, ended, markEnded,
    }
    this.active.set(job.id, run)
    this.setStatus(job.id, 'running', { startedAt: record.startedAt ?? Date.now(), finishedAt: null, error: null })

    let data: PreparedDataset
    try {
      data = await this.options.prepareDataset(record.dataset, this.cacheDir, { seqLen: record.config.train.seq_len })
    } catch (e) {
      return this.end(run, 'failed', messageOf(e))
    }
    if (data.records) {
      const { records, truncated, dropped } = data.records
      this.event(job.id, 'log', `dataset: ${records.toLocaleString('en-US')} records, ${data.tokens.toLocaleString('en-US')} tokens` +
        (truncated || dropped ? `; ${truncated} truncated and ${dropped} dropped at ${record.config.train.seq_len} tokens` : ''))
    }
    if (run.stopRequested) return this.end(run, 'stopped', null)
    let config = record.config
    if (!job.resumeDir && needsEsftMeasurement(config)) {
      try {
        config = await this.measureEsft(record, data.path)
      } catch (e) {
        return this.end(run, 'failed', messageOf(e))
      }
      if (run.stopRequested) return this.end(run, 'stopped', null)
    }

    let port: EnginePort
    try {
      port = this.options.portFactory(this.options.workerEntry)
    } catch (e) {
      return this.end(run, 'failed', `cannot start the engine process: ${messageOf(e)}`)
    }
    run.port = port
    port.onMessage((msg) => this.onWorkerMessage(run, msg))
    port.onExit((exit) => this.onWorkerExit(run, exit))
    port.send({
      type: 'start',
      runId: record.id,
      runDir: record.runDir,
      configJson: engineConfigJson(config, record.offload),
      dataPath: data.path,
      ...(data.evalPath ? { evalPath: data.evalPath } : {}),
      initDir: job.resumeDir ? undefined : (record.init ?? undefined),
      resumeDir: job.resumeDir,
      dbPath: this.options.dbPath,
    })
    if (run.paused) port.send({ type: 'pause' })
  }

  // ESFT without a chosen set: the measurement the Measure button runs (the run's data, its esft settings, the
  // init weights), its chosen set written into the run's config and the measurement stored with the run.
  private async measureEsft(record: RunRecord, tokenFile: string): Promise<RunRecord['config']> {
    const params = { config: record.config, dataset: record.dataset, ...(record.init ? { init: record.init } : {}) }
    const job = measureJob(params, tokenFile)
    this.event(record.id, 'log', `esft: measuring the experts over ${job.batches} batches (threshold ${job.threshold}, score ${job.score})`)
    const shares = expertSharesFromEngine(await (this.options.measure ?? runMeasureWorker)(job))
    const config = { ...record.config, finetune: { ...record.config.finetune!, experts: shares.experts } }
    this.store.updateRun(record.id, { config, expertShares: shares })
    const chosen = Object.values(shares.experts).reduce((n, ids) => n + ids.length, 0)
    this.event(record.id, 'log', `esft: ${chosen} experts chosen over ${shares.layers.length} MoE layers (finetune.experts)`)
    this.publish(record.id)
    return config
  }

  private onWorkerMessage(run: ActiveRun, msg: FromWorker): void {
    if (run.deleting) return
    switch (msg.type) {
      case 'started':
        run.step = msg.step
        this.event(
          run.id,
          'started',
          // The description says the threads and kernels, and where the threads outnumber the CPUs.
          `engine started on the ${msg.backend} backend: ${msg.numParams.toLocaleString('en-US')} parameters, from step ${msg.step}`
            + ` · ${msg.backendDescription}`,
        )
        break
      case 'step':
        run.step = msg.record.step
        this.options.emit('run.step', liveStepEvent(run.id, msg.record))
        break
      case 'checkpoint':
        this.event(run.id, 'checkpoint', `checkpoint at step ${msg.step}: ${msg.dir}`)
        break
      case 'nonfinite':
        this.diverged(run, msg.step, msg.message)
        break
      case 'done':
        run.step = msg.step
        run.outcome = msg.status
        break
      case 'failed':
        run.step = msg.step
        run.failure = msg.error
        break
    }
  }

  // The engine has already acted on train.on_nonfinite; the host records it and follows: a paused run shows
  // as paused (and can be resumed), a stopping one ends failed with the engine's account.
  private diverged(run: ActiveRun, step: number, message: string): void {
    run.step = Math.max(run.step, step)
    const policy = this.store.getRun(run.id)?.config.train.on_nonfinite ?? 'pause'
    if (policy === 'pause' && !run.paused && !run.stopRequested) {
      run.paused = true
      this.setStatus(run.id, 'paused')
      this.event(run.id, 'paused', `diverged at ${message}`)
      return
    }
    if (policy === 'stop') run.diverged = message
    this.event(run.id, 'log', `diverged at ${message}`)
  }

  private onWorkerExit(run: ActiveRun, exit: EngineExit): void {
    // Live steps are throttled; the stored step is the last one that is durable.
    run.step = Math.max(run.step, this.store.getRun(run.id)?.step ?? 0)
    const { status, error } = runOutcome(run, exit)
    this.end(run, status, error)
  }

  private end(run: ActiveRun, status: 'finished' | 'stopped' | 'failed', error: string | null): void {
    this.active.delete(run.id)
    const record = this.store.getRun(run.id)
    if (!run.deleting) {
      try {
        this.setStatus(run.id, status, { finishedAt: Date.now(), error })
        this.event(run.id, status, error ?? `${status} at step ${this.store.getRun(run.id)?.step ?? run.step}`)
      } catch (e) {
        process.emitWarning(`run ${run.id}: could not record its end (${status}): ${messageOf(e)}`)
      }
    }
    // Released after the end is recorded: another host never sees this run active with no owner.
    if (record) releaseRun(record.runDir)
    run.markEnded()
    this.schedule()
  }

  private activeIn(id: string, allowed: readonly RunStatus[], verb: string): ActiveRun {
    const record = this.requireRun(id)
    const run = this.active.get(id)
    if (!run || !allowed.includes(record.status))
      throw new RunStateError(`run ${id} is ${record.status}; only a ${allowed.join(' or ')} run can be ${verb}`)
    return run
  }

  private requireRun(id: string): RunRecord {
    const record = this.store.getRun(id)
    if (!record) throw new RunStateError(`no run with id ${JSON.stringify(id)}`)
    return record
  }

  private requireOpen(): void {
    if (this.closed) throw new RunStateError('the run manager is shut down')
  }

  private isInsideRunsDir(dir: string): boolean {
    const rel = relative(resolve(this.options.runsDir), resolve(dir))
    return rel !== '' && !rel.startsWith('..') && !isAbsolute(rel)
  }

  private setStatus(id: string, status: RunStatus, patch: Partial<Omit<RunRecord, 'id' | 'status'>> = {}): void {
    this.store.updateRun(id, { ...patch, status })
    this.publish(id)
  }

  private publish(id: string): void {
    this.options.emit('run.status', this.summary(id))
  }

  private summary(id: string): RunSummary {
    return toRunSummary(this.requireRun(id))
  }

  private event(runId: string, kind: RunEvent['kind'], message: string): void {
    const e: RunEvent = { runId, at: Date.now(), kind, message }
    this.store.addEvent(e)
    this.options.emit('run.event', e)
  }
}

/** ESFT with no chosen experts: the run measures them before it trains (the engine refuses such a config). */
export function needsEsftMeasurement(config: RunRecord['config']): boolean {
  const f = config.finetune
  return !!f && f.method === 'esft' && (!f.experts || Object.keys(f.experts).length === 0)
}
