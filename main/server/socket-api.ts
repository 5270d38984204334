// The WebSocket side of browser mode: {id, method, params} in, {id, result} | {id, error} out, and
// every host event pushed as {event, payload}. The same dispatch as IPC, so both transports accept
// and return exactly the same things.
import { WebSocket, type RawData, type WebSocketServer } from 'ws'

import type { ApiHandlers, EventName, EventSink } from '../api/contract'
import { dispatch } from '../api/dispatch'
import { checkedSink } from '../api/event-check'
import type { ApiErrorBody, Reply } from '../api/wire'

// Per-step events are the bulk of the traffic; a client this far behind skips them rather than
// making the server buffer without bound (status changes still go through, and it can re-read).
const STEP_EVENT_BACKLOG_LIMIT = 8 * 1024 * 1024
const HEARTBEAT_MS = 30_000

type RequestId = string | number

export function serveApi(
  wss: WebSocketServer,
  handlers: ApiHandlers,
  onEvent: (listener: EventSink) => () => void,
): () => void {
  wss.on('connection', (socket) => {
    let alive = true
    socket.on('pong', () => (alive = true))
    const heartbeat = setInterval(() => {
      // A tunnelled connection can die without a close; two silent heartbeats end it.
      if (!alive) return socket.terminate()
      alive = false
      socket.ping()
    }, HEARTBEAT_MS)
    socket.on('close', () => clearInterval(heartbeat))
    // Protocol violations (an oversized frame, bad UTF-8) end this client, never the server.
    socket.on('error', () => socket.terminate())
    socket.on('message', (data, isBinary) => void answer(socket, handlers, data, isBinary))
  })

  return onEvent(
    checkedSink(
      (name, payload) => broadcast(wss, name, JSON.stringify({ event: name, payload })),
      (name, issues) => console.error(`dropped a malformed "${name}" event:`, issues),
    ),
  )
}

async function answer(socket: WebSocket, handlers: ApiHandlers, data: RawData, isBinary: boolean): Promise<void> {
  const request = isBinary ? undefined : parseRequest(data.toString())
  const reply: Reply & { id: RequestId | null } = request
    ? { id: request.id, ...(await dispatch(handlers, request.method, request.params)) }
    : { id: null, error: badMessage }
  if (socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify(reply))
}

const badMessage: ApiErrorBody = {
  code: 'bad-message',
  message: 'expected a JSON text message {"id": string | number, "method": string, "params": object}',
  issues: [],
}

function parseRequest(text: string): { id: RequestId; method: string; params: unknown } | undefined {
  let message: unknown
  try {
    message = JSON.parse(text)
  } catch {
    return undefined
  }
  if (typeof message !== 'object' || message === null) return undefined
  const { id, method, params } = message as Record<string, unknown>
  if ((typeof id !== 'string' && typeof id !== 'number') || typeof method !== 'string') return undefined
  return { id, method, params }
}

function broadcast(wss: WebSocketServer, name: EventName, message: string): void {
  for (const client of wss.clients) {
    if (client.readyState !== WebSocket.OPEN) continue
    if (name === 'run.step' && client.bufferedAmount > STEP_EVENT_BACKLOG_LIMIT) continue
    client.send(message)
  }
}
