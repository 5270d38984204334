// Engine processes as Electron utility processes (the desktop app). Electron is required only when a
// port is made, so importing this module under plain Node is harmless.
import { requireHere } from './module-location'
import type { EngineExit, EnginePortFactory } from './port'
import type { FromWorker, ToWorker } from './worker-protocol'

type Electron = typeof import('electron')

export const utilityPortFactory: EnginePortFactory = (entryFile) => {
  const { utilityProcess } = requireHere()('electron') as Electron
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
