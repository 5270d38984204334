// Browser mode: one WebSocket to the serving host, reopened with exponential backoff when it drops.
// Requests sent before a drop fail with 'disconnected' (the host may or may not have run them);
// requests made while it is down wait and go out once it is back.
import { isEventName, ReplySchema, type Reply } from '../wire'
import type { ConnectionState, Transport } from './transport'

// The part of the WebSocket API used here; the browser's and the `ws` package's both fit, so the
// same code runs in the page and in Node tests.
export interface SocketLike {
  readonly readyState: number
  send(data: string): void
  close(code?: number, reason?: string): void
  onopen: ((event: unknown) => void) | null
  onclose: ((event: unknown) => void) | null
  onerror: ((event: unknown) => void) | null
  onmessage: ((event: { data: unknown }) => void) | null
}
export type SocketFactory = (url: string) => SocketLike

export interface SocketTransportOptions {
  url: string
  connect: SocketFactory
  initialDelayMs?: number
  maxDelayMs?: number
}

const OPEN = 1

const disconnected: Reply = {
  error: { code: 'disconnected', message: 'the connection to the workbench host was lost before it answered', issues: [] },
}

export function socketTransport(options: SocketTransportOptions): Transport {
  const connect = options.connect
  const initialDelayMs = options.initialDelayMs ?? 250
  const maxDelayMs = options.maxDelayMs ?? 8000

  let socket: SocketLike | undefined
  let state: ConnectionState = 'connecting'
  let failures = 0
  let retry: ReturnType<typeof setTimeout> | undefined
  let closed = false
  let nextId = 1
  const inFlight = new Map<number, (reply: Reply) => void>()
  const waiting: { id: number; text: string; settle: (reply: Reply) => void }[] = []
  const eventListeners = new Map<string, Set<(payload: unknown) => void>>()
  const stateListeners = new Set<(state: ConnectionState) => void>()

  function setState(next: ConnectionState): void {
    if (next === state) return
    state = next
    for (const listener of stateListeners) listener(next)
  }

  function open(): void {
    setState('connecting')
    const current = connect(options.url)
    socket = current
    current.onopen = () => {
      failures = 0
      setState('open')
      for (const message of waiting.splice(0)) {
        inFlight.set(message.id, message.settle)
        current.send(message.text)
      }
    }
    current.onmessage = (event) => receive(event.data)
    current.onerror = () => {}
    current.onclose = () => {
      if (socket !== current) return
      socket = undefined
      for (const [id, settle] of inFlight) {
        inFlight.delete(id)
        settle(disconnected)
      }
      setState('closed')
      if (!closed) scheduleReconnect()
    }
  }

  function scheduleReconnect(): void {
    // Jitter keeps several tabs from reconnecting in lockstep after the host restarts.
    const ceiling = Math.min(maxDelayMs, initialDelayMs * 2 ** failures)
    failures += 1
    retry = setTimeout(open, ceiling / 2 + (Math.random() * ceiling) / 2)
  }

  function receive(data: unknown): void {
    if (typeof data !== 'string') return
    let message: unknown
    try {
      message = JSON.parse(data)
    } catch {
      return
    }
    if (typeof message !== 'object' || message === null) return
    const { id, event, payload, ...reply } = message as Record<string, unknown>
    if (isEventName(event)) {
      for (const listener of eventListeners.get(event) ?? []) listener(payload)
      return
    }
    if (typeof id !== 'number') return
    const settle = inFlight.get(id)
    if (!settle) return
    inFlight.delete(id)
    const parsed = ReplySchema.safeParse(reply)
    settle(parsed.success ? parsed.data : { error: { code: 'bad-message', message: 'the host sent a malformed reply', issues: [] } })
  }

  open()

  return {
    kind: 'socket',
    request(method, params) {
      if (closed) return Promise.resolve(disconnected)
      const id = nextId++
      const text = JSON.stringify({ id, method, params })
      return new Promise<Reply>((settle) => {
        if (socket && socket.readyState === OPEN) {
          inFlight.set(id, settle)
          socket.send(text)
        } else waiting.push({ id, text, settle })
      })
    },
    subscribe(event, listener) {
      const listeners = eventListeners.get(event) ?? new Set()
      eventListeners.set(event, listeners)
      listeners.add(listener)
      return () => {
        listeners.delete(listener)
      }
    },
    onConnection(listener) {
      stateListeners.add(listener)
      listener(state)
      return () => {
        stateListeners.delete(listener)
      }
    },
    close() {
      closed = true
      clearTimeout(retry)
      for (const message of waiting.splice(0)) message.settle(disconnected)
      socket?.close(1000, 'client closed')
    },
  }
}
