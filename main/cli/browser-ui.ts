// Browser mode for `serve` and `demo`: the built renderer served with the host's API on 127.0.0.1.
import { existsSync } from 'node:fs'
import { join } from 'node:path'

import { packageRoot } from '../host/catalog'
import type { Host } from '../host/host'
import { startServer, type RunningServer } from '../server'
import type { CliContext } from './context'

// The API works without the built UI, and the server answers the page with build instructions until
// it exists, so a missing build is a warning here rather than a refusal.
function rendererDir(ctx: CliContext): string {
  const dir = join(packageRoot(), 'out', 'renderer')
  if (!existsSync(join(dir, 'index.html')))
    ctx.err.write(`warning: the UI is not built (${dir}/index.html is missing); run \`npx electron-vite build\` in ${packageRoot()}, then reload the page\n`)
  return dir
}

export async function serveUi(host: Host, ctx: CliContext, port?: number): Promise<RunningServer> {
  const server = await startServer({ handlers: host.handlers, onEvent: host.onEvent, staticDir: rendererDir(ctx), port })
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
