// Engine processes as Node child processes (child_process.fork): the CLI, serve mode and tests.
import { fork } from 'node:child_process'

import type { EngineExit, EnginePort, EnginePortFactory } from './port'
import type { FromWorker, ToWorker } from './worker-protocol'

export const forkPortFactory: EnginePortFactory = (entryFile) => {
  // No execArgv: the parent's flags (a test runner's loaders, an inspector port) are not the engine's.
  const child = fork(entryFile, [], { execArgv: [], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  const exitListeners: ((e: EngineExit) => void)[] = []
  let exited: EngineExit | null = null
  const exit = (e: EngineExit) => {
    if (exited) return
    exited = e
    for (const cb of exitListeners) cb(e)
  }
  // 'close', not 'exit': it comes after the IPC channel has delivered every message of the process.
  child.on('close', (code, signal) => exit({ code, signal }))
  // A process that cannot be spawned emits 'error' and never 'exit'; later errors (a send racing the
  // exit) change nothing the exit will not report.
  child.on('error', () => {
    if (child.pid === undefined) exit({ code: null, signal: null })
  })

  const port: EnginePort = {
    send(msg: ToWorker) {
      if (child.connected) child.send(msg)
    },
    onMessage(cb) {
      child.on('message', (msg) => cb(msg as FromWorker))
    },
    onExit(cb) {
      if (exited) queueMicrotask(() => cb(exited as EngineExit))
      else exitListeners.push(cb)
    },
    kill(signal: NodeJS.Signals = 'SIGTERM') {
      if (!exited) child.kill(signal)
    },
  }
  return port
}
