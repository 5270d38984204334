// The engine process's side of its link to the host: Electron's process.parentPort in a utility
// process, the IPC channel of child_process.fork otherwise.
import type { FromWorker, ToWorker } from './worker-protocol'

export interface ParentChannel {
  post(msg: FromWorker): void
  onMessage(cb: (msg: ToWorker) => void): void
  /** Resolves once messages posted so far have left this process. */
  flushed(): Promise<void>
}

interface ParentPort {
  postMessage(msg: unknown): void
  on(event: 'message', cb: (e: { data: unknown }) => void): void
}

export function connectToParent(): ParentChannel {
  const parentPort = (process as unknown as { parentPort?: ParentPort }).parentPort
  if (parentPort) {
    return {
      post: (msg) => parentPort.postMessage(msg),
      onMessage: (cb) => parentPort.on('message', (e) => cb(e.data as ToWorker)),
      flushed: () => new Promise((resolve) => setImmediate(resolve)),
    }
  }
  const send = process.send?.bind(process)
  if (!send)
    throw new Error('engine-worker: no parent process to talk to (start it with child_process.fork or utilityProcess.fork)')
  let pending: Promise<void> = Promise.resolve()
  return {
    post(msg) {
      pending = new Promise((resolve) => send(msg, undefined, undefined, () => resolve()))
    },
    onMessage: (cb) => process.on('message', (msg) => cb(msg as ToWorker)),
    // IPC messages are written in order, so the last one's callback covers all before it.
    flushed: () => pending,
  }
}
