// Electron IPC adapter: one ipcMain.handle per contract request, each answering with a Reply
// envelope (errors as data, so field paths reach the renderer; a thrown error would arrive as a bare
// message string).
import { requestChannel, requestNames, type ApiHandlers } from '../api/contract'
import { dispatch } from '../api/dispatch'
import type { Reply } from '../api/wire'

// The part of Electron's ipcMain the adapter uses; tests pass the electron mock's.
export interface IpcMainLike {
  handle(channel: string, listener: (event: unknown, ...args: unknown[]) => Promise<Reply>): void
  removeHandler(channel: string): void
}

export function registerIpcHandlers(ipcMain: IpcMainLike, handlers: ApiHandlers): () => void {
  const channels = requestNames.map((name) => {
    const channel = requestChannel(name)
    ipcMain.handle(channel, (_event, params) => dispatch(handlers, name, params))
    return channel
  })
  return () => channels.forEach((channel) => ipcMain.removeHandler(channel))
}
