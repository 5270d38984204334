// The `moe-workbench` command (bundled to out/main/cli.js; bin/moe-workbench.js loads it).
import { defaultDataDir } from '../host/data-dir'
import { createHost } from '../host/host'
import type { CliContext } from './context'
import { runCli } from './run-cli'

const dataDir = defaultDataDir()

const ctx: CliContext = {
  out: process.stdout,
  err: process.stderr,
  dataDir,
  openHost: (options) => createHost({ dataDir, ...options }),
  onInterrupt(handler) {
    process.on('SIGINT', handler)
    process.on('SIGTERM', handler)
    return () => {
      process.off('SIGINT', handler)
      process.off('SIGTERM', handler)
    }
  },
}

// An interrupt with no command listening (while the host opens or closes) still ends the process.
const exitOnInterrupt = () => process.exit(130)
process.on('SIGINT', () => {
  if (process.listenerCount('SIGINT') === 1) exitOnInterrupt()
})

runCli(process.argv.slice(2), ctx).then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`moe-workbench: ${error instanceof Error ? error.stack : String(error)}\n`)
    process.exit(1)
  },
)
