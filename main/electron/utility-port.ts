// Engine processes as Electron utility processes (the desktop app): the Electron entry hands this factory
// to the host (HostOptions.portFactory); the host itself knows nothing of Electron.
import { utilityProcess } from 'electron'

import type { EngineExit, EnginePortFactory } from '../host/engine/port'
import type { FromWorker, ToWorker } from '../host/engine/worker-protocol'

export const utilityPortFactory: EnginePortFactory = (entryFile) => {
  const child = utilityProcess.fork(entryFile, [], { serviceName: 'moe-engine', stdio: 'inherit' })
  let exited: EngineExit | null = null
  const exitListeners: ((e: EngineExit) => void)[] = []
  let killedWith: string | null = null
  // Electron reports only an exit code; a kill we sent is reported as that signal.
  child.on('exit', (code) => {
    exited = { code: killedWith ? null : code, signal: killedWith }
    for (const cb of exitListeners) cb(exited)
  })
  return {
    send(msg: ToWorker) {
      if (!exited) child.postMessage(msg)
    },
    onMessage(cb) {
      child.on('message', (msg) => cb(msg as FromWorker))
    },
    onExit(cb) {
      if (exited) queueMicrotask(() => cb(exited as EngineExit))
      else exitListeners.push(cb)
    },
    kill(signal: NodeJS.Signals = 'SIGTERM') {
      if (exited) return
      killedWith = signal
      child.kill()
    },
  }
}
