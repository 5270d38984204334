// Stand-in for the `electron` module in Node tests: records IPC registrations so adapters can be
// exercised without the Electron runtime.
type Handler = (event: unknown, ...args: unknown[]) => unknown

export const handlers = new Map<string, Handler>()

export const ipcMain = {
  handle(channel: string, handler: Handler) {
    handlers.set(channel, handler)
  },
  removeHandler(channel: string) {
    handlers.delete(channel)
  },
}

export const app = {
  isPackaged: false,
  getPath: (_name: string) => '/tmp',
  whenReady: () => Promise.resolve(),
  on: () => undefined,
  quit: () => undefined,
}

export default { ipcMain, app }
