// Browser mode for `serve` and `demo`: the built renderer served with the host's API on 127.0.0.1.
import { existsSync } from 'node:fs'
import { join } from 'node:path'

import { packageRoot } from '../host/catalog'
import type { Host } from '../host/host'
import { startServer, type RunningServer } from '../server'
import type { CliContext } from './context'

export function rendererDir(): string {
  const dir = join(packageRoot(), 'out', 'renderer')
  if (!existsSync(join(dir, 'index.html')))
    throw new Error(`${dir}/index.html is missing: build the UI first with \`npx electron-vite build\` in ${packageRoot()}`)
  return dir
}

export async function serveUi(host: Host, ctx: CliContext, port?: number): Promise<RunningServer> {
  const server = await startServer({ handlers: host.handlers, onEvent: host.onEvent, staticDir: rendererDir(), port })
  ctx.out.write(`MoE Workbench is serving ${ctx.dataDir}\nOpen ${server.url}\n(reach it from another machine through an SSH tunnel: ssh -L ${server.port}:127.0.0.1:${server.port} HOST)\n`)
  return server
}

export function untilInterrupted(ctx: CliContext): Promise<void> {
  return new Promise((resolve) => {
    const stop = ctx.onInterrupt(() => {
      stop()
      resolve()
    })
  })
}
