import { beforeAll, beforeEach, describe, expect, it, vi } from 'vitest'

import type { PreloadApi } from '../../main/api/wire'

// The preload script runs against Electron's renderer-side modules, which the shared mock lacks.
const bridge = vi.hoisted(() => {
  const exposed = new Map<string, unknown>()
  const listeners = new Map<string, Set<(...args: unknown[]) => void>>()
  return {
    exposed,
    listeners,
    contextBridge: { exposeInMainWorld: (key: string, value: unknown) => exposed.set(key, value) },
    ipcRenderer: {
      invoke: vi.fn(async (channel: string, params: unknown) => ({ result: { channel, params } })),
      on(channel: string, listener: (...args: unknown[]) => void) {
        if (!listeners.has(channel)) listeners.set(channel, new Set())
        listeners.get(channel)!.add(listener)
      },
      removeListener(channel: string, listener: (...args: unknown[]) => void) {
        listeners.get(channel)?.delete(listener)
      },
    },
  }
})
vi.mock('electron', () => ({ contextBridge: bridge.contextBridge, ipcRenderer: bridge.ipcRenderer }))

let api: PreloadApi

beforeAll(async () => {
  await import('../../preload/index')
  api = bridge.exposed.get('api') as PreloadApi
})

beforeEach(() => bridge.ipcRenderer.invoke.mockClear())

describe('preload bridge', () => {
  it('exposes window.api with invoke and on, and nothing else', () => {
    expect([...bridge.exposed.keys()]).toEqual(['api'])
    expect(Object.keys(api).sort()).toEqual(['invoke', 'on'])
  })

  it('invokes contract requests on their derived channel', async () => {
    await expect(api.invoke('runs.get', { id: 'run-1' })).resolves.toEqual({ result: { channel: 'api:runs.get', params: { id: 'run-1' } } })
  })

  it('refuses names outside the contract without touching IPC', async () => {
    for (const name of ['runs.explode', 'constructor', 'event:run.status']) await expect(api.invoke(name, {})).rejects.toThrow(/unknown request/)
    expect(bridge.ipcRenderer.invoke).not.toHaveBeenCalled()
  })

  it('delivers only the payload of an event, and unsubscribes', () => {
    const received: unknown[] = []
    const stop = api.on('run.status', (payload) => received.push(payload))
    const channelListeners = bridge.listeners.get('event:run.status')!
    expect(channelListeners.size).toBe(1)
    for (const listener of channelListeners) listener({ sender: 'ipcRenderer' }, { id: 'run-1' })
    expect(received).toEqual([{ id: 'run-1' }])
    stop()
    expect(channelListeners.size).toBe(0)
  })

  it('refuses to subscribe to events outside the contract', () => {
    expect(() => api.on('api:runs.list', () => {})).toThrow(/unknown event/)
  })
})
