import { afterEach, describe, expect, it, vi } from 'vitest'
import WebSocket from 'ws'

import { ApiInputError } from '../../main/api/contract'
import { startServer, type RunningServer } from '../../main/server'
import { createApiClient } from '../../main/api/client/client'
import { ApiError } from '../../main/api/client/errors'
import { socketTransport, type SocketLike } from '../../main/api/client/socket-transport'
import type { ConnectionState } from '../../main/api/client/transport'
import { eventHub, fakeHandlers, stepEvent, summary, tinyWith, validParams } from './contract-fixtures'

const TOKEN = 'client-test-token-0123456789abcdefghijklmnopqrstuv'
// The `ws` package stands in for the browser's WebSocket (Node 20 has none).
const connect = (url: string) => new WebSocket(url) as unknown as SocketLike

const cleanups: (() => unknown)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
  vi.useRealTimers()
  vi.restoreAllMocks()
})

async function serve(handlers = fakeHandlers(), hub = eventHub(), port = 0): Promise<RunningServer> {
  const server = await startServer({ handlers, onEvent: hub.onEvent, staticDir: '/nonexistent', token: TOKEN, port })
  cleanups.push(() => server.close())
  return server
}

function client(port: number, delays = { initialDelayMs: 10, maxDelayMs: 40 }) {
  const transport = socketTransport({ url: `ws://127.0.0.1:${port}/api?token=${TOKEN}`, connect, ...delays })
  cleanups.push(() => transport.close())
  const states: ConnectionState[] = []
  transport.onConnection((state) => states.push(state))
  return { api: createApiClient(transport), states }
}

describe('WebSocket transport against the server', () => {
  it('invokes requests end to end, with typed and checked results', async () => {
    const handlers = fakeHandlers()
    const server = await serve(handlers)
    const { api, states } = client(server.port)
    await expect(api.invoke('runs.list', {})).resolves.toEqual([summary()])
    await expect(api.invoke('metrics.expertLoad', { id: 'run-1', layer: 2 })).resolves.toEqual({ layer: 2, experts: 2, steps: [1], counts: [3, 5], bias: null })
    expect(handlers.calls.map((call) => call.name)).toEqual(['runs.list', 'metrics.expertLoad'])
    expect(states).toEqual(['connecting', 'open'])
  })

  it('answers concurrent requests each with its own result', async () => {
    const server = await serve()
    const { api } = client(server.port)
    const dirs = await Promise.all(
      Array.from({ length: 20 }, (_, i) => api.invoke('checkpoints.export', { id: 'run-1', dir: `/tmp/export-${i}` })),
    )
    expect(dirs.map((answer) => answer.dir)).toEqual(Array.from({ length: 20 }, (_, i) => `/tmp/export-${i}`))
  })

  it('surfaces the server-side validation of fields the client cannot check', async () => {
    const handlers = fakeHandlers({
      'runs.create': async () => {
        throw new ApiInputError('runs.create', [{ path: 'spec.dataset.path', message: 'no such file' }])
      },
    })
    const server = await serve(handlers)
    const { api } = client(server.port)
    const error = (await api.invoke('runs.create', validParams['runs.create']).catch((e: unknown) => e)) as ApiError
    expect(error).toBeInstanceOf(ApiError)
    expect(error.issuesAt('spec.dataset.path')).toEqual(['no such file'])
  })

  it('stops bad params in the client', async () => {
    const handlers = fakeHandlers()
    const server = await serve(handlers)
    const { api } = client(server.port)
    const params = { spec: { ...validParams['runs.create'].spec, config: tinyWith('model', 'top_k', 9) } } as typeof validParams['runs.create']
    await expect(api.invoke('runs.create', params)).rejects.toMatchObject({ code: 'invalid-params' })
    expect(handlers.calls).toEqual([])
  })

  it('delivers pushed events', async () => {
    const hub = eventHub()
    const server = await serve(fakeHandlers(), hub)
    const { api } = client(server.port)
    const losses: (number | null)[] = []
    api.on('run.step', (payload) => losses.push(payload.metrics.loss))
    await api.invoke('runs.list', {})
    hub.emit('run.step', stepEvent('run-1', 1, 5.5))
    hub.emit('run.step', stepEvent('run-1', 2, 5.25))
    await vi.waitFor(() => expect(losses).toEqual([5.5, 5.25]))
  })

  it('reconnects after the host restarts, failing what was in flight and sending what waited', async () => {
    let releaseSlow: () => void = () => {}
    const handlers = fakeHandlers({
      'runs.checkpoint': () => new Promise((resolve) => (releaseSlow = () => resolve({ ok: true }))),
    })
    const first = await serve(handlers)
    const { api, states } = client(first.port)
    await api.invoke('runs.list', {})
    const inFlight = api.invoke('runs.checkpoint', { id: 'run-1' }).catch((e: unknown) => e)
    await vi.waitFor(() => expect(handlers.calls.at(-1)?.name).toBe('runs.checkpoint'))

    await first.close()
    releaseSlow()
    expect(await inFlight).toMatchObject({ code: 'disconnected' })
    await vi.waitFor(() => expect(states.at(-1)).not.toBe('open'))
    // Asked while the host is down: waits for the reconnection instead of failing.
    const waiting = api.invoke('runs.list', {})

    const second = await serve(fakeHandlers(), eventHub(), first.port)
    await expect(waiting).resolves.toEqual([summary()])
    expect(states[0]).toBe('connecting')
    expect(states).toContain('closed')
    expect(states.at(-1)).toBe('open')
    await second.close()
  })

  it('is refused, and keeps retrying, with a wrong token', async () => {
    const server = await serve()
    const transport = socketTransport({ url: `ws://127.0.0.1:${server.port}/api?token=wrong`, connect, initialDelayMs: 5, maxDelayMs: 10 })
    cleanups.push(() => transport.close())
    const states: ConnectionState[] = []
    transport.onConnection((state) => states.push(state))
    await vi.waitFor(() => expect(states.filter((state) => state === 'closed').length).toBeGreaterThanOrEqual(2))
    expect(states).not.toContain('open')
  })
})

describe('reconnect backoff', () => {
  it('doubles the delay after each failure up to the ceiling, and resets once connected', () => {
    vi.useFakeTimers()
    vi.spyOn(Math, 'random').mockReturnValue(1)
    const sockets: SocketLike[] = []
    const transport = socketTransport({
      url: 'ws://127.0.0.1:1/api',
      initialDelayMs: 100,
      maxDelayMs: 800,
      connect: () => {
        const socket: SocketLike = { readyState: 0, send: () => {}, close: () => {}, onopen: null, onclose: null, onerror: null, onmessage: null }
        sockets.push(socket)
        return socket
      },
    })
    const fail = () => sockets.at(-1)!.onclose!({})
    const attemptsAfter = (ms: number) => {
      vi.advanceTimersByTime(ms)
      return sockets.length
    }

    expect(sockets).toHaveLength(1)
    fail()
    expect(attemptsAfter(99)).toBe(1)
    expect(attemptsAfter(1)).toBe(2)
    fail()
    expect(attemptsAfter(199)).toBe(2)
    expect(attemptsAfter(1)).toBe(3)
    fail()
    expect(attemptsAfter(400)).toBe(4)
    fail()
    expect(attemptsAfter(799)).toBe(4)
    expect(attemptsAfter(1)).toBe(5)
    fail()
    expect(attemptsAfter(800)).toBe(6)

    sockets.at(-1)!.onopen!({})
    fail()
    expect(attemptsAfter(100)).toBe(7)
    transport.close()
    fail()
    expect(attemptsAfter(10_000)).toBe(7)
  })
})
