// A RunManager over a real store and forked engine processes in a temp dir, recording every event it
// emits and the port of every run, with polling waits for the states tests look for.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import type { EventName, EventPayload, RunEvent, RunStatus, RunSummary } from '../../../main/api/contract'
import { prepareDataset } from '../../../main/host/datasets'
import { forkPortFactory } from '../../../main/host/engine/fork-port'
import type { EnginePort } from '../../../main/host/engine/port'
import { toRunSummary } from '../../../main/host/run-summary'
import { RunManager } from '../../../main/host/runs/run-manager'
import { TelemetryStore } from '../../../main/host/store/store'

export interface EngineHarness {
  dir: string
  store: TelemetryStore
  manager: RunManager
  /** The engine process of each run (the latest one after a restart). */
  ports: Map<string, EnginePort>
  statuses(id: string): RunStatus[]
  events(id: string): RunEvent[]
  liveSteps(id: string): EventPayload<'run.step'>[]
  waitFor<T>(what: string, probe: () => T | undefined | false, timeoutMs?: number): Promise<T>
  /** Polls the stored status (the current one, not any earlier). */
  waitForStatus(id: string, status: RunStatus, timeoutMs?: number): Promise<RunSummary>
  close(): Promise<void>
}

export function createEngineHarness(workerEntry: string, opts: { concurrency?: number } = {}): EngineHarness {
  const dir = mkdtempSync(join(tmpdir(), 'run-manager-'))
  const dbPath = join(dir, 'workbench.db')
  const store = TelemetryStore.open(dbPath)
  const emitted: { name: EventName; payload: EventPayload<EventName> }[] = []
  const ports = new Map<string, EnginePort>()

  const recordingPorts = (entry: string): EnginePort => {
    const port = forkPortFactory(entry)
    return {
      ...port,
      send(msg) {
        if (msg.type === 'start') ports.set(msg.runId, port)
        port.send(msg)
      },
    }
  }

  const manager = new RunManager({
    store,
    runsDir: join(dir, 'runs'),
    dbPath,
    concurrency: opts.concurrency,
    portFactory: recordingPorts,
    workerEntry,
    prepareDataset,
    emit: (name, payload) => void emitted.push({ name, payload }),
  })

  const of = <E extends EventName>(name: E) =>
    emitted.filter((e) => e.name === name).map((e) => e.payload as EventPayload<E>)

  const waitFor = async <T>(what: string, probe: () => T | undefined | false, timeoutMs = 30_000): Promise<T> => {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      const value = probe()
      if (value !== undefined && value !== false) return value
      if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
      await new Promise((r) => setTimeout(r, 10))
    }
  }

  return {
    dir,
    store,
    manager,
    ports,
    statuses: (id) => of('run.status').filter((s) => s.id === id).map((s) => s.status),
    events: (id) => of('run.event').filter((e) => e.runId === id),
    liveSteps: (id) => of('run.step').filter((s) => s.id === id),
    waitFor,
    waitForStatus: (id, status, timeoutMs) =>
      waitFor(
        `run ${id} to be ${status}`,
        () => {
          const record = store.getRun(id)
          return record?.status === status && toRunSummary(record)
        },
        timeoutMs,
      ),
    async close() {
      await manager.shutdown(5_000)
      store.close()
      rmSync(dir, { recursive: true, force: true })
    },
  }
}
