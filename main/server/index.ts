// Browser mode: serves the built renderer and the typed API over one WebSocket, on 127.0.0.1 only,
// to holders of the per-session token. `moe-workbench serve` and the end-to-end tests start it.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Duplex } from 'node:stream'

import { WebSocketServer } from 'ws'

import type { ApiHandlers, EventSink } from '../api/contract'
import { SOCKET_PATH } from '../api/wire'
import {
  MIN_TOKEN_LENGTH,
  isLoopbackHostHeader,
  newSessionToken,
  originAllowed,
  readCookie,
  sessionCookie,
  sessionCookieName,
  tokensMatch,
} from './auth'
import { securityHeaders } from './security-headers'
import { serveApi } from './socket-api'
import { findStaticFile, sendStaticFile } from './static-files'

export const LOOPBACK = '127.0.0.1'

// Requests are small (a run spec is a few KB); anything bigger is not from our client.
const MAX_MESSAGE_BYTES = 4 * 1024 * 1024

export interface ServerOptions {
  handlers: ApiHandlers
  onEvent: (listener: EventSink) => () => void
  staticDir: string
  // 0 or absent: a free port chosen by the system.
  port?: number
  // Only loopback: the server exposes training control and the file system paths of the host.
  host?: string
  // Absent: a fresh random token. Given: at least MIN_TOKEN_LENGTH characters.
  token?: string
}

export interface RunningServer {
  // Opening this URL in a browser signs it in for the session.
  url: string
  port: number
  token: string
  close(): Promise<void>
}

export async function startServer(options: ServerOptions): Promise<RunningServer> {
  if (options.host !== undefined && options.host !== LOOPBACK && options.host !== 'localhost')
    throw new Error(`browser mode listens on ${LOOPBACK} only (asked for "${options.host}"); reach it from elsewhere through an SSH tunnel`)
  const token = options.token ?? newSessionToken()
  if (token.length < MIN_TOKEN_LENGTH) throw new Error(`the session token needs at least ${MIN_TOKEN_LENGTH} characters`)

  const wss = new WebSocketServer({ noServer: true, maxPayload: MAX_MESSAGE_BYTES })
  const stopEvents = serveApi(wss, options.handlers, options.onEvent)
  let port = 0
  const server = createServer((request, response) => {
    handleHttp(request, response, options.staticDir, token, port).catch(() => {
      if (!response.headersSent) response.writeHead(500)
      response.end()
    })
  })
  server.on('upgrade', (request: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on('error', () => socket.destroy())
    const refusal = refuseUpgrade(request, token, port)
    if (refusal) {
      socket.end(`HTTP/1.1 ${refusal}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`)
      return
    }
    wss.handleUpgrade(request, socket, head, (ws) => wss.emit('connection', ws, request))
  })

  try {
    await new Promise<void>((resolveListen, rejectListen) => {
      server.once('error', rejectListen)
      server.listen(options.port ?? 0, LOOPBACK, () => {
        server.off('error', rejectListen)
        resolveListen()
      })
    })
  } catch (error) {
    stopEvents()
    wss.close()
    throw error
  }
  port = (server.address() as AddressInfo).port

  let closing: Promise<void> | undefined
  return {
    url: `http://${LOOPBACK}:${port}/?token=${encodeURIComponent(token)}`,
    port,
    token,
    close: () =>
      (closing ??= new Promise<void>((resolveClose) => {
        stopEvents()
        for (const client of wss.clients) client.close(1001, 'server closing')
        wss.close()
        server.close(() => resolveClose())
        server.closeAllConnections()
        // Clients that ignore the close frame are cut off.
        setTimeout(() => wss.clients.forEach((client) => client.terminate()), 1000).unref()
      })),
  }
}

// An HTTP status line for a refused WebSocket handshake, or undefined to accept it.
function refuseUpgrade(request: IncomingMessage, token: string, port: number): string | undefined {
  const host = request.headers.host
  if (!isLoopbackHostHeader(host)) return '403 Forbidden'
  const url = new URL(request.url ?? '/', `http://${host}`)
  if (url.pathname !== SOCKET_PATH) return '404 Not Found'
  if (!originAllowed(request.headers.origin, host)) return '403 Forbidden'
  const given = url.searchParams.get('token') ?? readCookie(request.headers.cookie, sessionCookieName(port))
  if (!tokensMatch(token, given)) return '401 Unauthorized'
  return undefined
}

async function handleHttp(
  request: IncomingMessage,
  response: ServerResponse,
  staticDir: string,
  token: string,
  port: number,
): Promise<void> {
  const host = request.headers.host
  if (!isLoopbackHostHeader(host)) return sendText(response, 403, `This server only answers requests addressed to ${LOOPBACK}.`)
  for (const [name, value] of Object.entries(securityHeaders(host))) response.setHeader(name, value)
  const url = new URL(request.url ?? '/', `http://${host}`)

  // First visit: trade the token in the URL for a cookie and drop it from the address bar.
  const offered = url.searchParams.get('token')
  if (offered !== null) {
    if (!tokensMatch(token, offered)) return sendText(response, 401, 'This access token is not valid for this session.')
    url.searchParams.delete('token')
    response.writeHead(303, {
      'Set-Cookie': sessionCookie(port, token),
      Location: url.pathname + url.search,
      'Cache-Control': 'no-store',
    })
    return void response.end()
  }
  if (!tokensMatch(token, readCookie(request.headers.cookie, sessionCookieName(port))))
    return sendText(response, 401, 'Open the address printed by `moe-workbench serve`: it carries the access token for this session.')

  if (request.method !== 'GET' && request.method !== 'HEAD') {
    response.setHeader('Allow', 'GET, HEAD')
    return sendText(response, 405, 'Only GET and HEAD are served here; the API is on the WebSocket.')
  }
  const file = await findStaticFile(staticDir, url.pathname)
  if (file) return sendStaticFile(response, file, request.method === 'HEAD')
  if (url.pathname === '/' || url.pathname === '/index.html')
    return sendText(response, 503, 'The UI is not built yet: run `npm run build`, then reload.')
  sendText(response, 404, 'Not found.')
}

function sendText(response: ServerResponse, status: number, text: string): void {
  response.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8', 'Cache-Control': 'no-store' })
  response.end(`${text}\n`)
}
