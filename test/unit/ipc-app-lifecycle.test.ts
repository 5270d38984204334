// main/index.ts against a stand-in Electron: the window's security settings, the host wiring, and a
// quit that waits for the host to close.
import { beforeAll, describe, expect, it, vi } from 'vitest'

import { requestChannel, requestNames } from '../../main/api/contract'
import { eventHub, fakeHandlers, summary } from './contract-fixtures'

const electron = vi.hoisted(() => {
  type Listener = (...args: unknown[]) => void
  const appListeners = new Map<string, Listener[]>()
  const windows: { options: Record<string, unknown>; sent: [string, unknown][]; loaded: string[] }[] = []
  const handlers = new Map<string, (...args: unknown[]) => unknown>()
  class BrowserWindow {
    static getAllWindows = () => windows.map((w) => ({ webContents: { send: (c: string, p: unknown) => w.sent.push([c, p]), isDestroyed: () => false } }))
    webContents: Record<string, unknown>
    constructor(options: Record<string, unknown>) {
      const record = { options, sent: [] as [string, unknown][], loaded: [] as string[] }
      windows.push(record)
      this.webContents = { setWindowOpenHandler: () => {}, on: () => {}, getURL: () => '' }
    }
    once() {}
    on() {}
    loadFile(path: string) {
      windows.at(-1)!.loaded.push(path)
      return Promise.resolve()
    }
    loadURL(url: string) {
      windows.at(-1)!.loaded.push(url)
      return Promise.resolve()
    }
  }
  return {
    appListeners,
    windows,
    handlers,
    quits: { count: 0 },
    module: {
      app: {
        isPackaged: false,
        whenReady: () => Promise.resolve(),
        requestSingleInstanceLock: () => true,
        on(event: string, listener: Listener) {
          appListeners.set(event, [...(appListeners.get(event) ?? []), listener])
        },
        quit: () => {},
        exit: () => {},
      },
      BrowserWindow,
      Menu: { buildFromTemplate: (template: unknown) => template, setApplicationMenu: () => {} },
      session: { defaultSession: { setPermissionRequestHandler: () => {}, setPermissionCheckHandler: () => {} } },
      dialog: { showErrorBox: vi.fn() },
      ipcMain: {
        handle: (channel: string, handler: (...args: unknown[]) => unknown) => handlers.set(channel, handler),
        removeHandler: (channel: string) => handlers.delete(channel),
      },
    },
  }
})

const host = vi.hoisted(() => ({ createHost: vi.fn(), close: vi.fn() }))

vi.mock('electron', () => electron.module)
vi.mock('../../main/host/host', () => ({ createHost: host.createHost }))

const hub = eventHub()
let releaseClose: () => void = () => {}

beforeAll(async () => {
  process.env['MOE_WORKBENCH_HOME'] = '/tmp/moe-lifecycle-test'
  host.close.mockImplementation(() => new Promise<void>((resolve) => (releaseClose = resolve)))
  host.createHost.mockResolvedValue({ handlers: fakeHandlers(), onEvent: hub.onEvent, close: host.close })
  electron.module.app.quit = () => void electron.quits.count++
  await import('../../main/index')
  await vi.waitFor(() => expect(electron.windows).toHaveLength(1))
})

describe('Electron entry', () => {
  it('starts the host on the shared data directory, its engines as Electron utility processes', async () => {
    const { utilityPortFactory } = await import('../../main/electron/utility-port')
    expect(host.createHost).toHaveBeenCalledExactlyOnceWith({ dataDir: '/tmp/moe-lifecycle-test', portFactory: utilityPortFactory })
  })

  it('opens one isolated, sandboxed window without Node, titled MoE Workbench', () => {
    const [window] = electron.windows
    expect(window!.options).toMatchObject({
      title: 'MoE Workbench',
      icon: expect.stringMatching(/resources\/icons\/icon\.png$/),
      webPreferences: { contextIsolation: true, sandbox: true, nodeIntegration: false, preload: expect.stringMatching(/preload\/index\.js$/) },
    })
    expect(window!.loaded).toEqual([expect.stringMatching(/renderer\/index\.html$/)])
  })

  it('registers the API on IPC and forwards host events to the window', async () => {
    expect([...electron.handlers.keys()].sort()).toEqual(requestNames.map(requestChannel).sort())
    await expect(electron.handlers.get('api:runs.list')!({}, {})).resolves.toEqual({ result: [summary()] })
    hub.emit('run.status', summary())
    expect(electron.windows[0]!.sent).toEqual([['event:run.status', summary()]])
  })

  it('quits only after the host has closed', async () => {
    const beforeQuit = electron.appListeners.get('before-quit')![0]!
    const event = { preventDefault: vi.fn() }
    beforeQuit(event)
    beforeQuit({ preventDefault: vi.fn() })
    expect(event.preventDefault).toHaveBeenCalled()
    expect(host.close).toHaveBeenCalledOnce()
    expect(electron.quits.count).toBe(0)
    releaseClose()
    await vi.waitFor(() => expect(electron.quits.count).toBe(1))
    const afterClose = { preventDefault: vi.fn() }
    beforeQuit(afterClose)
    expect(afterClose.preventDefault).not.toHaveBeenCalled()
  })
})
