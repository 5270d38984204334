// The host's handle on one engine process, whatever kind of process it is (a Node child process for
// the CLI, serve mode and tests; an Electron utility process in the desktop app).
import type { FromWorker, ToWorker } from './worker-protocol'

export interface EngineExit {
  code: number | null
  signal: string | null
}

export interface EnginePort {
  send(msg: ToWorker): void
  onMessage(cb: (msg: FromWorker) => void): void
  /** Called once, when the process has gone (normally, by a signal, or when it could not start). */
  onExit(cb: (e: EngineExit) => void): void
  kill(signal?: NodeJS.Signals): void
}

/** Starts the engine process whose entry is entryFile (the built engine-worker.js). */
export type EnginePortFactory = (entryFile: string) => EnginePort
