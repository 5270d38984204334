// Supervision logic without real engines: RunManager over scripted engine processes, how an exit
// becomes a run status, live-step coalescing, batched step writes and run ids.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, dirname, join } from 'node:path'

import { afterEach, describe, expect, it, vi } from 'vitest'

import { RunConfigSchema } from '../../main/api/config'
import { LiveThrottle } from '../../main/host/engine/live-throttle'
import type { EngineExit, EnginePort } from '../../main/host/engine/port'
import type { EngineStepRecord } from '../../main/host/engine/step-record'
import { StepWriter } from '../../main/host/engine/step-writer'
import type { FromWorker, ToWorker } from '../../main/host/engine/worker-protocol'
import { planRun } from '../../main/host/planner/plan'
import { RunManager } from '../../main/host/runs/run-manager'
import { newRunId } from '../../main/host/runs/run-id'
import { runOutcome } from '../../main/host/runs/run-outcome'
import { TelemetryStore } from '../../main/host/store/store'
import { tinyConfig } from '../integration/helpers/engine-fixtures'

class ScriptedPort implements EnginePort {
  readonly sent: ToWorker[] = []
  private message: (msg: FromWorker) => void = () => {}
  private exit: (e: EngineExit) => void = () => {}
  killedWith: string | undefined
  send(msg: ToWorker) {
    this.sent.push(msg)
  }
  onMessage(cb: (msg: FromWorker) => void) {
    this.message = cb
  }
  onExit(cb: (e: EngineExit) => void) {
    this.exit = cb
  }
  kill(signal: NodeJS.Signals = 'SIGTERM') {
    this.killedWith = signal
    queueMicrotask(() => this.exit({ code: null, signal }))
  }
  say(msg: FromWorker) {
    this.message(msg)
  }
  exitWith(code: number | null, signal: string | null = null) {
    this.exit({ code, signal })
  }
}

const stepRecord = (step: number): EngineStepRecord => ({
  step, loss: 1, aux_loss: 0, lr: 0, grad_norm: 0, tokens: 1, step_ms: 1, forward_ms: 0, backward_ms: 0, optimizer_ms: 0, eval_loss: NaN,
  expertTokens: [],
})

const cleanups: (() => void)[] = []
afterEach(() => cleanups.splice(0).forEach((c) => c()))

function setUp(concurrency = 1, budgets?: () => { device: number; host: number; ssd: number | null }) {
  const dir = mkdtempSync(join(tmpdir(), 'engine-supervision-'))
  const store = TelemetryStore.open(join(dir, 'db.sqlite'))
  cleanups.push(() => {
    store.close()
    rmSync(dir, { recursive: true, force: true })
  })
  const ports: ScriptedPort[] = []
  const manager = new RunManager({
    store,
    runsDir: join(dir, 'runs'),
    dbPath: join(dir, 'db.sqlite'),
    concurrency,
    portFactory: () => {
      const port = new ScriptedPort()
      ports.push(port)
      return port
    },
    workerEntry: 'engine-worker.js',
    prepareDataset: async (spec) => ({ path: spec.path, vocabSize: 256, tokens: 10_000 }),
    emit: () => {},
    budgets,
  })
  const create = (name: string) => manager.create({ name, config: tinyConfig(), dataset: { path: '/data/x.bin' } }).id
  const until = (probe: () => boolean) => vi.waitFor(() => expect(probe()).toBe(true))
  return { store, manager, ports, create, until }
}

describe('RunManager supervision (scripted engine processes)', () => {
  it('names how an engine process died, and starts the next run each time', async () => {
    const { store, ports, create, until } = setUp()
    const ids = ['abort', 'silent', 'reported', 'ok'].map(create)
    const script: [(p: ScriptedPort) => void, string | null][] = [
      [(p) => p.exitWith(134), 'engine process exited with code 134 at step 7'],
      [(p) => p.exitWith(0), 'engine process exited without finishing at step 7'],
      [
        (p) => (p.say({ type: 'failed', error: 'model.top_k: exceeds n_experts', step: 0 }), p.exitWith(1)),
        'model.top_k: exceeds n_experts',
      ],
      [(p) => (p.say({ type: 'done', status: 'finished', step: 7 }), p.exitWith(0)), null],
    ]
    for (const [i, [act, error]] of script.entries()) {
      await until(() => ports.length === i + 1)
      expect(ports[i].sent[0]).toMatchObject({ type: 'start', runId: ids[i], dataPath: '/data/x.bin' })
      ports[i].say({ type: 'step', record: { ...stepRecord(7), wallTime: 0, expertTokens: [] } })
      act(ports[i])
      await until(() => store.getRun(ids[i])?.status !== 'running')
      expect(store.getRun(ids[i])).toMatchObject({ status: error ? 'failed' : 'finished', error })
    }
  })

  it('settles a run’s offload before its engine starts, records it, and hands the engine the resolved mode', async () => {
    const config = RunConfigSchema.parse({ ...tinyConfig(), offload: { mode: 'auto' } })
    const resident = planRun(config, { device: 2 ** 40, host: 2 ** 40, ssd: null }).tiers[0]!.total
    const { store, manager, ports, until } = setUp(1, () => ({ device: resident - 1, host: 2 ** 40, ssd: null }))
    const id = manager.create({ name: 'auto', config, dataset: { path: '/data/x.bin' } }).id
    expect(store.getRun(id)?.offload).toMatchObject({ requested: 'auto', mode: 'host', deviceBudgetBytes: resident - 1 })
    expect(store.getRun(id)?.offload?.slots).toBeGreaterThanOrEqual(2)
    await until(() => ports.length === 1)
    const start = ports[0]!.sent[0] as Extract<ToWorker, { type: 'start' }>
    expect(JSON.parse(start.configJson).offload).toMatchObject({ mode: 'host', device_budget_bytes: resident - 1, expert_slots: null })
    const tooSmall = () => manager.create({ name: 'nowhere', config: { ...config, offload: { ...config.offload!, device_budget_bytes: 1024 } }, dataset: { path: '/d' } })
    expect(tooSmall).toThrow(/spec\.config\.offload\.mode: auto: nothing fits: .*the device tier is short by/)
    expect(store.listRuns()).toHaveLength(1)
  })

  it('runs up to `concurrency` engines at once and kills those that ignore a shutdown', async () => {
    const { store, manager, ports, create, until } = setUp(2)
    const [a, b, c] = ['a', 'b', 'c'].map(create)
    await until(() => ports.length === 2)
    expect([a, b, c].map((id) => store.getRun(id)?.status)).toEqual(['running', 'running', 'queued'])
    await manager.shutdown(50)
    expect(ports.map((p) => p.sent.at(-1)?.type)).toEqual(['stop', 'stop'])
    expect(ports.map((p) => p.killedWith)).toEqual(['SIGKILL', 'SIGKILL'])
    expect(store.getRun(a)?.error).toBe('engine process killed by SIGKILL at step 0')
    expect(store.getRun(c)?.status).toBe('queued')
    expect(() => create('late')).toThrow(/shut down/)
  })

  it('recovers after a host crash: active runs fail, queued ones run', async () => {
    const first = setUp()
    const running = first.create('running')
    const queued = first.create('queued')
    await first.until(() => first.ports.length === 1)
    const { store } = first
    const second = new RunManager({
      store,
      runsDir: '/unused',
      dbPath: '/unused',
      portFactory: () => new ScriptedPort(),
      workerEntry: 'engine-worker.js',
      prepareDataset: async (spec) => ({ path: spec.path, vocabSize: 256, tokens: 1 }),
      emit: () => {},
    })
    second.recover()
    expect(store.getRun(running)).toMatchObject({ status: 'failed' })
    expect(store.getRun(running)?.error).toMatch(/host exited while the run was running/)
    expect(store.getRun(queued)?.status).toBe('running')
  })

  it('leaves alone the runs of another live host on the same data', async () => {
    const first = setUp()
    const running = first.create('running')
    await first.until(() => first.ports.length === 1)
    const runDir = first.store.getRun(running)?.runDir as string
    writeFileSync(join(dirname(runDir), `.${basename(runDir)}.host`), String(process.ppid))  // alive, not this host
    const second = new RunManager({
      store: first.store,
      runsDir: '/unused',
      dbPath: '/unused',
      portFactory: () => new ScriptedPort(),
      workerEntry: 'engine-worker.js',
      prepareDataset: async (spec) => ({ path: spec.path, vocabSize: 256, tokens: 1 }),
      emit: () => {},
    })
    second.recover()
    expect(first.store.getRun(running)?.status).toBe('running')
  })

  it('refuses operations that do not fit the state', () => {
    const { manager, create } = setUp()
    const id = create('x')
    expect(() => manager.resume(id)).toThrow(/only a paused run can be resumed/)
    expect(() => manager.restart(id)).toThrow(/only a stopped or failed run can be restarted/)
    expect(() => manager.pause('nope')).toThrow(/no run with id "nope"/)
  })
})

describe('runOutcome', () => {
  it('prefers what the engine reported, then the signal, then the exit code', () => {
    const killed = { code: null, signal: 'SIGKILL' }
    expect(runOutcome({ step: 3, failure: 'boom' }, killed)).toEqual({ status: 'failed', error: 'boom' })
    expect(runOutcome({ step: 3 }, { code: null, signal: 'SIGSEGV' }).error).toBe('engine process killed by SIGSEGV at step 3')
    expect(runOutcome({ step: 3, outcome: 'stopped' }, { code: 0, signal: null })).toEqual({ status: 'stopped', error: null })
    expect(runOutcome({ step: 0 }, { code: null, signal: null }).error).toBe('engine process could not be started')
  })
})

describe('LiveThrottle', () => {
  it('sends the first at once and coalesces the rest to the newest per interval', () => {
    vi.useFakeTimers()
    try {
      const sent: number[] = []
      const t = new LiveThrottle<number>(100, (v) => sent.push(v))
      for (let i = 1; i <= 50; i++) {
        t.push(i)
        vi.advanceTimersByTime(10)
      }
      t.flush()
      expect(sent[0]).toBe(1)
      expect(sent.at(-1)).toBe(50)
      expect(sent.length).toBeLessThanOrEqual(7)
    } finally {
      vi.useRealTimers()
    }
  })
})

describe('StepWriter', () => {
  it('writes the steps that arrive together in one call', async () => {
    const calls: number[][] = []
    const writer = new StepWriter({ appendSteps: (_id, records) => void calls.push(records.map((r) => r.step)) }, 'r', (e) => {
      throw e
    })
    for (const s of [1, 2, 3]) writer.push(stepRecord(s), s)
    await new Promise((r) => setImmediate(r))
    writer.push(stepRecord(4), 4)
    writer.flush()
    expect(calls).toEqual([[1, 2, 3], [4]])
  })
})

describe('newRunId', () => {
  it('slugs the name and adds a suffix that avoids taken ids', () => {
    expect(newRunId('MoE-S  ablation #3 (pin 25%)', () => false)).toMatch(/^moe-s-ablation-3-pin-25-[a-z0-9]{6}$/)
    expect(newRunId('日本語', () => false)).toMatch(/^run-[a-z0-9]{6}$/)
    let tries = 0
    expect(newRunId('x', () => ++tries < 3)).toMatch(/^x-/)
    expect(tries).toBe(3)
  })
})
