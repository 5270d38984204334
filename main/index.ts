// Electron entry: starts the host, exposes it to the window over IPC, and closes it before quitting.
// Everything that is not Electron-specific lives in the host, so the CLI and browser mode share it.
import { app, BrowserWindow, dialog, ipcMain } from 'electron'

import { forwardEvents } from './electron/event-forwarding'
import { registerIpcHandlers } from './electron/ipc'
import { installMenu } from './electron/menu'
import { utilityPortFactory } from './electron/utility-port'
import { createMainWindow, denyAllPermissions } from './electron/window'
import { defaultDataDir } from './host/data-dir'
import { createHost, type Host } from './host/host'

// The same data directory as the CLI (MOE_WORKBENCH_HOME or ~/.moe-workbench), so CLI runs show up
// in the window and runs started here are visible to `moe-workbench runs`.
const dataDir = defaultDataDir()

let host: Host | undefined
let hostClosed = false
let closing: Promise<void> | undefined
let mainWindow: BrowserWindow | undefined

function openWindow(): void {
  mainWindow = createMainWindow()
  mainWindow.on('closed', () => (mainWindow = undefined))
}

async function start(): Promise<void> {
  await app.whenReady()
  denyAllPermissions()
  installMenu()
  const started = await createHost({ dataDir, portFactory: utilityPortFactory })
  host = started
  registerIpcHandlers(ipcMain, started.handlers)
  forwardEvents(
    (listener) => started.onEvent(listener),
    () => BrowserWindow.getAllWindows().map((window) => window.webContents),
  )
  openWindow()
}

if (!app.requestSingleInstanceLock()) {
  // Two instances would fight over one telemetry database; the first one gets focused instead.
  app.quit()
} else {
  app.on('second-instance', () => {
    if (!mainWindow) return
    if (mainWindow.isMinimized()) mainWindow.restore()
    mainWindow.focus()
  })
  app.on('activate', () => {
    if (host && BrowserWindow.getAllWindows().length === 0) openWindow()
  })
  app.on('window-all-closed', () => {
    if (process.platform !== 'darwin') app.quit()
  })
  // Quitting waits for the host to stop its engine processes and flush telemetry.
  app.on('before-quit', (event) => {
    if (!host || hostClosed) return
    event.preventDefault()
    closing ??= host
      .close()
      .catch((error: unknown) => console.error('closing the host failed:', error))
      .finally(() => {
        hostClosed = true
        app.quit()
      })
  })
  start().catch((error: unknown) => {
    dialog.showErrorBox('MoE Workbench could not start', error instanceof Error ? error.message : String(error))
    app.exit(1)
  })
}
