// The composition root: one telemetry store, one run manager and the API handlers over them, for
// a data directory laid out as workbench.db, runs/<id>/ and cache/. The Electron app, the browser-mode
// server and the CLI all build their host here, so they see the same runs.
import { mkdir } from 'node:fs/promises'
import { join } from 'node:path'

import type { ApiHandlers, EventSink } from '../api/contract'
import { packageRoot } from './catalog'
import { dataLayout } from './data-dir'
import { prepareDataset } from './datasets'
import { forkPortFactory } from './engine/fork-port'
import type { EnginePortFactory } from './engine/port'
import { ChatSessions } from './generate/chat-sessions'
import { createHandlers } from './handlers'
import { probeHardware } from './hardware'
import { budgetsOf } from './planner/resolve'
import { RunManager } from './runs/run-manager'
import { TelemetryStore } from './store/store'

export interface HostOptions {
  dataDir: string
  /** Runs trained at once; default 1. */
  concurrency?: number
  /** How engine processes start; default: Node child processes (the Electron entry passes utility processes). */
  portFactory?: EnginePortFactory
  /** Default: the built out/main/engine-worker.js of this package. */
  workerEntry?: string
  /**
   * Fail the runs a previous host left active and start its queued ones; default true. Commands
   * that only read (or drive a single run) pass false, so they never take over another process's runs.
   */
  recoverRuns?: boolean
  /** Heartbeat period and staleness (see RunManager); tests shorten them. */
  heartbeatMs?: number
  staleMs?: number
}

export interface Host {
  handlers: ApiHandlers
  onEvent(listener: EventSink): () => void
  runs: RunManager
  store: TelemetryStore
  dataDir: string
  close(): Promise<void>
}

export const defaultWorkerEntry = (): string => join(packageRoot(), 'out', 'main', 'engine-worker.js')

// One listener's failure (a closed window, a dropped socket) must not keep events from the others.
function eventHub() {
  const listeners = new Set<EventSink>()
  const emit: EventSink = (name, payload) => {
    for (const listener of listeners) {
      try {
        listener(name, payload)
      } catch (e) {
        process.emitWarning(`an event listener failed on ${name}: ${e instanceof Error ? e.message : String(e)}`)
      }
    }
  }
  const subscribe = (listener: EventSink) => {
    listeners.add(listener)
    return () => void listeners.delete(listener)
  }
  return { emit, subscribe }
}

export async function createHost(options: HostOptions): Promise<Host> {
  const { dbPath, runsDir, cacheDir } = dataLayout(options.dataDir)
  await mkdir(runsDir, { recursive: true })
  await mkdir(cacheDir, { recursive: true })
  const store = TelemetryStore.open(dbPath)
  const events = eventHub()
  const runs = new RunManager({
    store,
    runsDir,
    dbPath,
    cacheDir,
    concurrency: options.concurrency,
    portFactory: options.portFactory ?? forkPortFactory,
    workerEntry: options.workerEntry ?? defaultWorkerEntry(),
    prepareDataset,
    emit: events.emit,
    budgets: () => budgetsOf(probeHardware(options.dataDir)),
    heartbeatMs: options.heartbeatMs,
    staleMs: options.staleMs,
  })
  const watchOthers = options.recoverRuns ?? true
  if (watchOthers) runs.recover()
  // Every host keeps its own runs' heartbeat; those that recover runs also watch other hosts' runs.
  runs.watch(watchOthers)

  const chats = new ChatSessions(store, events.emit, dataLayout(options.dataDir).scratchDir)
  let closing: Promise<void> | undefined
  return {
    handlers: createHandlers({ store, runs, dataDir: options.dataDir, chats }),
    onEvent: events.subscribe,
    runs,
    store,
    dataDir: options.dataDir,
    close: () =>
      (closing ??= (async () => {
        try {
          chats.cancelAll()
          await runs.shutdown()
        } finally {
          store.close()
        }
      })()),
  }
}
