// The one application window: sandboxed renderer, no Node, the preload bridge as its only way out,
// and no navigation or new windows (a link that escaped would run remote content with our bridge).
import { join } from 'node:path'

import { BrowserWindow, session } from 'electron'

const appIcon = join(__dirname, '../../resources/icons/icon.png')
const preloadScript = join(__dirname, '../preload/index.js')
const rendererPage = join(__dirname, '../renderer/index.html')

export function createMainWindow(): BrowserWindow {
  const window = new BrowserWindow({
    title: 'MoE Workbench',
    icon: appIcon,
    width: 1280,
    height: 820,
    minWidth: 800,
    minHeight: 520,
    show: false,
    backgroundColor: '#14161a',
    webPreferences: {
      preload: preloadScript,
      contextIsolation: true,
      sandbox: true,
      nodeIntegration: false,
      webviewTag: false,
      spellcheck: false,
    },
  })
  window.once('ready-to-show', () => window.show())
  // The page's <title> must not replace the product name in the title bar.
  window.on('page-title-updated', (event) => event.preventDefault())
  window.webContents.setWindowOpenHandler(() => ({ action: 'deny' }))
  window.webContents.on('will-navigate', (event, url) => {
    if (url !== window.webContents.getURL()) event.preventDefault()
  })

  // electron-vite's dev server sets this; a built app loads its own files.
  const devServer = process.env['ELECTRON_RENDERER_URL']
  if (devServer) void window.loadURL(devServer)
  else void window.loadFile(rendererPage)
  return window
}

// Nothing the renderer does needs a browser permission (camera, notifications, ...).
export function denyAllPermissions(): void {
  session.defaultSession.setPermissionRequestHandler((_contents, _permission, callback) => callback(false))
  session.defaultSession.setPermissionCheckHandler(() => false)
}
