// Small HTTP/WebSocket clients for the browser-mode server tests (raw node:http so the Host header
// can be forged, which fetch forbids).
import { request } from 'node:http'

import WebSocket from 'ws'

export type HttpAnswer = { status: number; headers: Record<string, string | string[] | undefined>; body: string }

export function httpGet(
  port: number,
  path: string,
  headers: Record<string, string> = {},
  method = 'GET',
  address = '127.0.0.1',
): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    const req = request({ host: address, port, path, method, headers }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => (body += chunk))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }))
    })
    req.on('error', reject)
    req.end()
  })
}

// Resolves with the open socket, or rejects with the HTTP status of the refused handshake.
export function openSocket(url: string, options: WebSocket.ClientOptions = {}): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url, options)
    socket.once('open', () => resolve(socket))
    socket.once('unexpected-response', (_req, res) => {
      reject(Object.assign(new Error(`handshake refused: ${res.statusCode}`), { status: res.statusCode }))
      socket.terminate()
    })
    socket.once('error', (error) => reject(error))
  })
}

export function refusalStatus(attempt: Promise<WebSocket>): Promise<number | undefined> {
  return attempt.then(
    (socket) => {
      socket.terminate()
      return undefined
    },
    (error: { status?: number }) => error.status,
  )
}

// Collects every JSON message a socket receives; `next` waits for the first one matching.
export function messages(socket: WebSocket): { next(match: (message: Record<string, unknown>) => boolean): Promise<Record<string, unknown>>; all: Record<string, unknown>[] } {
  const all: Record<string, unknown>[] = []
  const waiters: { match: (m: Record<string, unknown>) => boolean; resolve: (m: Record<string, unknown>) => void }[] = []
  socket.on('message', (data) => {
    const message = JSON.parse(data.toString()) as Record<string, unknown>
    all.push(message)
    for (const waiter of [...waiters]) {
      if (waiter.match(message)) {
        waiters.splice(waiters.indexOf(waiter), 1)
        waiter.resolve(message)
      }
    }
  })
  return {
    all,
    next: (match) =>
      new Promise((resolve) => {
        const seen = all.find(match)
        if (seen) resolve(seen)
        else waiters.push({ match, resolve })
      }),
  }
}
