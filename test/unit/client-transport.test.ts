import { afterEach, describe, expect, it, vi } from 'vitest'

import type { PreloadApi, Reply } from '../../main/api/wire'
import { createApiClient } from '../../main/api/client/client'
import { ApiError } from '../../main/api/client/errors'
import { selectTransport, socketUrl } from '../../main/api/client/select-transport'
import type { SocketLike } from '../../main/api/client/socket-transport'
import type { Transport } from '../../main/api/client/transport'
import { stepEvent, summary, tinyWith, validParams } from './contract-fixtures'

function fakeBridge(answer: (name: string, params: unknown) => Reply): PreloadApi & { invoked: [string, unknown][]; emit: (event: string, payload: unknown) => void } {
  const invoked: [string, unknown][] = []
  const listeners = new Map<string, Set<(payload: unknown) => void>>()
  return {
    invoked,
    invoke: async (name, params) => {
      invoked.push([name, params])
      return answer(name, params)
    },
    on(event, listener) {
      if (!listeners.has(event)) listeners.set(event, new Set())
      listeners.get(event)!.add(listener)
      return () => listeners.get(event)!.delete(listener)
    },
    emit: (event, payload) => listeners.get(event)?.forEach((listener) => listener(payload)),
  }
}

// A transport that answers every request with a fixed reply and lets the test push events.
function fakeTransport(reply: Reply): Transport & { requests: [string, unknown][]; emit: (event: string, payload: unknown) => void } {
  const bridge = fakeBridge(() => reply)
  return {
    kind: 'ipc',
    requests: bridge.invoked,
    emit: bridge.emit,
    request: (method, params) => bridge.invoke(method, params),
    subscribe: (event, listener) => bridge.on(event, listener),
    onConnection: (listener) => {
      listener('open')
      return () => {}
    },
    close: () => {},
  }
}

describe('transport selection', () => {
  it('uses window.api when the preload bridge is present', async () => {
    const bridge = fakeBridge(() => ({ result: [summary()] }))
    const connect = vi.fn()
    const transport = selectTransport({ api: bridge, location: { href: 'file:///app/index.html' }, connect })
    expect(transport.kind).toBe('ipc')
    const client = createApiClient(transport)
    await expect(client.invoke('runs.list', {})).resolves.toEqual([summary()])
    expect(bridge.invoked).toEqual([['runs.list', {}]])
    expect(connect).not.toHaveBeenCalled()
    const states: string[] = []
    client.onConnection((state) => states.push(state))
    expect(states).toEqual(['open'])
  })

  it('opens a WebSocket back to the serving host when there is no bridge', () => {
    const opened: string[] = []
    const connect = (url: string): SocketLike => {
      opened.push(url)
      return { readyState: 0, send: () => {}, close: () => {}, onopen: null, onclose: null, onerror: null, onmessage: null }
    }
    const transport = selectTransport({ location: { href: 'http://127.0.0.1:4321/?token=abc' }, connect })
    expect(transport.kind).toBe('socket')
    expect(opened).toEqual(['ws://127.0.0.1:4321/api?token=abc'])
    transport.close()
  })

  it('derives the socket URL from the page, carrying the token only when the page has one', () => {
    expect(socketUrl('http://127.0.0.1:4321/')).toBe('ws://127.0.0.1:4321/api')
    expect(socketUrl('http://localhost:8080/runs/run-1?view=chart#x')).toBe('ws://localhost:8080/api')
    expect(socketUrl('http://127.0.0.1:4321/?token=a%2Bb&view=1')).toBe('ws://127.0.0.1:4321/api?token=a%2Bb')
    expect(socketUrl('https://tunnel.example/?token=t')).toBe('wss://tunnel.example/api?token=t')
  })
})

describe('API client', () => {
  afterEach(() => vi.restoreAllMocks())

  it('returns results that pass the contract', async () => {
    const transport = fakeTransport({ result: { ok: true } })
    await expect(createApiClient(transport).invoke('runs.stop', { id: 'run-1' })).resolves.toEqual({ ok: true })
    expect(transport.requests).toEqual([['runs.stop', { id: 'run-1' }]])
  })

  it('refuses bad params before sending them, with the field path', async () => {
    const transport = fakeTransport({ result: summary() })
    const params = { spec: { ...validParams['runs.create'].spec, config: tinyWith('model', 'top_k', 9) } } as typeof validParams['runs.create']
    const error = await createApiClient(transport).invoke('runs.create', params).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(ApiError)
    expect(error).toMatchObject({ code: 'invalid-params', method: 'runs.create' })
    expect((error as ApiError).issuesAt('spec.config.model.top_k')).toHaveLength(1)
    expect(transport.requests).toEqual([])
  })

  it('surfaces host errors with their code and field paths', async () => {
    const transport = fakeTransport({
      error: { code: 'invalid-params', message: 'runs.create: spec.dataset.path: no such file', issues: [{ path: 'spec.dataset.path', message: 'no such file' }] },
    })
    const error = (await createApiClient(transport).invoke('runs.create', validParams['runs.create']).catch((e: unknown) => e)) as ApiError
    expect(error).toBeInstanceOf(ApiError)
    expect(error.message).toBe('runs.create: spec.dataset.path: no such file')
    expect(error.issuesAt('spec.dataset.path')).toEqual(['no such file'])
  })

  it('refuses results the contract does not allow', async () => {
    const transport = fakeTransport({ result: [{ ...summary(), status: 'exploded' }] })
    const error = (await createApiClient(transport).invoke('runs.list', {}).catch((e: unknown) => e)) as ApiError
    expect(error).toMatchObject({ code: 'invalid-result' })
    expect(error.issues.map((issue) => issue.path)).toEqual(['0.status'])
  })

  it('refuses a malformed reply envelope', async () => {
    const transport = fakeTransport({ result: 1, error: 'x' } as unknown as Reply)
    await expect(createApiClient(transport).invoke('runs.list', {})).rejects.toMatchObject({ code: 'bad-message' })
  })

  it('delivers valid events and drops malformed ones', () => {
    const transport = fakeTransport({ result: null })
    const client = createApiClient(transport)
    const received: unknown[] = []
    const log = vi.spyOn(console, 'error').mockImplementation(() => {})
    const stop = client.on('run.step', (payload) => received.push(payload.metrics.loss))
    transport.emit('run.step', stepEvent('run-1', 5, 3.25))
    transport.emit('run.step', { id: 'run-1', metrics: { loss: 'high' } })
    expect(received).toEqual([3.25])
    expect(log).toHaveBeenCalledOnce()
    stop()
    transport.emit('run.step', stepEvent('run-1', 6, 3.0))
    expect(received).toEqual([3.25])
  })
})
