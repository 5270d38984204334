import { afterEach, describe, expect, it, vi } from 'vitest'

import { eventChannel, requestChannel, requestNames, type RunSummary } from '../../main/api/contract'
import { forwardEvents, type EventReceiver } from '../../main/electron/event-forwarding'
import { registerIpcHandlers } from '../../main/electron/ipc'
import { handlers as registered, ipcMain } from '../mocks/electron'
import { eventHub, fakeHandlers, stepEvent, summary, tinyWith, validParams } from './contract-fixtures'

const ipcEvent = { sender: {} }

function invoke(channel: string, params: unknown): Promise<unknown> {
  const handler = registered.get(channel)
  if (!handler) throw new Error(`nothing registered on ${channel}`)
  return Promise.resolve(handler(ipcEvent, params))
}

describe('IPC adapter', () => {
  let unregister: (() => void) | undefined
  afterEach(() => {
    unregister?.()
    unregister = undefined
    vi.restoreAllMocks()
  })

  it('registers exactly one handler per request, on the derived channel', () => {
    const handle = vi.spyOn(ipcMain, 'handle')
    unregister = registerIpcHandlers(ipcMain, fakeHandlers())
    const channels = handle.mock.calls.map(([channel]) => channel)
    expect(channels.sort()).toEqual(requestNames.map(requestChannel).sort())
    expect([...registered.keys()].sort()).toEqual(requestNames.map(requestChannel).sort())
  })

  it('unregisters every handler it registered', () => {
    unregister = registerIpcHandlers(ipcMain, fakeHandlers())
    unregister()
    unregister = undefined
    expect(registered.size).toBe(0)
  })

  it.each(requestNames)('routes a valid %s to its handler', async (name) => {
    const host = fakeHandlers()
    unregister = registerIpcHandlers(ipcMain, host)
    const reply = await invoke(requestChannel(name), validParams[name])
    expect(reply).toHaveProperty('result')
    expect(host.calls.map((call) => call.name)).toEqual([name])
  })

  it('answers bad params with a structured error naming the field', async () => {
    const host = fakeHandlers()
    unregister = registerIpcHandlers(ipcMain, host)
    const reply = await invoke(requestChannel('runs.create'), {
      spec: { ...validParams['runs.create'].spec, config: tinyWith('model', 'top_k', 9) },
    })
    expect(reply).toMatchObject({
      error: { code: 'invalid-params', message: expect.stringContaining('spec.config.model.top_k'), issues: [{ path: 'spec.config.model.top_k' }] },
    })
    expect(host.calls).toEqual([])
    // The envelope must cross Electron's structured clone intact.
    expect(structuredClone(reply)).toEqual(reply)
  })

  it('answers a failing handler with its message instead of throwing across IPC', async () => {
    unregister = registerIpcHandlers(
      ipcMain,
      fakeHandlers({
        'runs.delete': async () => {
          throw new Error('run-1 is still running')
        },
      }),
    )
    await expect(invoke(requestChannel('runs.delete'), { id: 'run-1' })).resolves.toEqual({
      error: { code: 'failed', message: 'run-1 is still running', issues: [] },
    })
  })

  it('refuses a malformed result from the host', async () => {
    unregister = registerIpcHandlers(ipcMain, fakeHandlers({ 'runs.pause': async () => ({ ok: false }) as unknown as { ok: true } }))
    await expect(invoke(requestChannel('runs.pause'), { id: 'run-1' })).resolves.toMatchObject({
      error: { code: 'invalid-result', issues: [{ path: 'ok' }] },
    })
  })
})

describe('event forwarding', () => {
  function receiver(destroyed = false): EventReceiver & { sent: [string, unknown][] } {
    const sent: [string, unknown][] = []
    return { sent, send: (channel, payload) => sent.push([channel, payload]), isDestroyed: () => destroyed }
  }

  it('sends every host event to every live window on the derived channel', () => {
    const hub = eventHub()
    const first = receiver()
    const second = receiver()
    const closed = receiver(true)
    forwardEvents(hub.onEvent, () => [first, second, closed])
    hub.emit('run.status', summary())
    hub.emit('run.step', stepEvent('run-1', 11, 4.1))
    for (const window of [first, second]) {
      expect(window.sent).toEqual([
        [eventChannel('run.status'), summary()],
        [eventChannel('run.step'), stepEvent('run-1', 11, 4.1)],
      ])
    }
    expect(closed.sent).toEqual([])
  })

  it('reaches windows opened after it started', () => {
    const hub = eventHub()
    const windows: EventReceiver[] = []
    forwardEvents(hub.onEvent, () => windows)
    const late = receiver()
    windows.push(late)
    hub.emit('run.status', summary())
    expect(late.sent).toHaveLength(1)
  })

  it('drops malformed events and logs them', () => {
    const hub = eventHub()
    const window = receiver()
    const log = vi.spyOn(console, 'error').mockImplementation(() => {})
    forwardEvents(hub.onEvent, () => [window])
    hub.emit('run.status', { ...summary(), status: 'exploded' } as unknown as RunSummary)
    expect(window.sent).toEqual([])
    expect(log).toHaveBeenCalledOnce()
    log.mockRestore()
  })

  it('stops when unsubscribed', () => {
    const hub = eventHub()
    const window = receiver()
    const stop = forwardEvents(hub.onEvent, () => [window])
    stop()
    hub.emit('run.status', summary())
    expect(window.sent).toEqual([])
    expect(hub.listeners()).toBe(0)
  })
})
