// The built renderer, served by browser mode with a fake host, in a real Chromium: signs in with the
// session token, shows the empty state, then renders runs pushed live over the WebSocket.
import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import { chromium, type BrowserContext, type Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

import type { RunSummary } from '../../main/api/contract'
import { startServer, type RunningServer } from '../../main/server'
import { eventHub, fakeHandlers, stepEvent, summary } from '../unit/contract-fixtures'

const root = new URL('../..', import.meta.url).pathname
const staticDir = join(root, 'out', 'renderer')
const artifacts = join(root, 'test-artifacts', 'e2e')
const chromiumPath = '/usr/bin/chromium'

let server: RunningServer
let context: BrowserContext
let page: Page
let userDataDir: string
const runs: RunSummary[] = []
const hub = eventHub()
const pageProblems: string[] = []

async function restartableServer(port = 0, token?: string): Promise<RunningServer> {
  return startServer({ handlers: fakeHandlers({ 'runs.list': async () => runs }), onEvent: hub.onEvent, staticDir, port, token })
}

beforeAll(async () => {
  if (!process.env['E2E_SKIP_BUILD']) execFileSync('npx', ['electron-vite', 'build'], { cwd: root, stdio: 'inherit' })
  if (!existsSync(join(staticDir, 'index.html'))) throw new Error(`no built renderer in ${staticDir}: run \`npx electron-vite build\``)
  mkdirSync(artifacts, { recursive: true })
  server = await restartableServer()
  userDataDir = mkdtempSync(join(tmpdir(), 'moe-e2e-chromium-'))
  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: chromiumPath,
    headless: true,
    viewport: { width: 1200, height: 700 },
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--no-first-run',
      '--disable-sync',
    ],
  })
  page = context.pages()[0] ?? (await context.newPage())
  // Any script error or CSP violation fails the run.
  page.on('pageerror', (error) => pageProblems.push(`pageerror: ${error.message}`))
  page.on('console', (message) => {
    if (message.type() === 'error') pageProblems.push(`console: ${message.text()} (${message.location().url})`)
  })
})

afterAll(async () => {
  await context?.close()
  await server?.close()
  if (userDataDir) rmSync(userDataDir, { recursive: true, force: true })
})

describe('browser mode in Chromium', () => {
  it('refuses a page load without the token', async () => {
    const anonymous = await context.newPage()
    const response = await anonymous.goto(server.url.replace(/\?token=.*/, ''))
    expect(response?.status()).toBe(401)
    await anonymous.close()
  })

  it('signs in with the URL token, drops it from the address bar and shows the empty state', async () => {
    await page.goto(server.url)
    expect(new URL(page.url()).search).toBe('')
    await page.getByTestId('runs-empty').waitFor()
    expect(await page.locator('h1').textContent()).toBe('MoE Workbench')
    expect(await page.getByTestId('runs-empty').textContent()).toContain('npx moe-workbench train --config resources/presets/tiny.json')
    await page.screenshot({ path: join(artifacts, 'runs-empty.png') })
  })

  it('renders runs pushed live: status, step and loss', async () => {
    const run = summary({ id: 'run-1', name: 'tiny demo', status: 'running', step: 0, totalSteps: 300, lastLoss: null, tokensPerSec: null })
    hub.emit('run.status', run)
    const row = page.locator('tr[data-run-id="run-1"]')
    await row.waitFor()
    expect(await row.textContent()).toContain('running')
    hub.emit('run.step', stepEvent('run-1', 42, 3.1416))
    await expect.poll(() => row.textContent()).toContain('42 / 300')
    expect(await row.textContent()).toContain('3.1416')
    hub.emit('run.status', summary({ id: 'run-0', name: 'baseline', status: 'finished', step: 300, createdAt: 1, lastLoss: 1.9876 }))
    await page.locator('tr[data-run-id="run-0"]').waitFor()
    expect(await page.locator('tbody tr').count()).toBe(2)
    await page.screenshot({ path: join(artifacts, 'runs-live.png') })
  })

  it('reconnects when the host comes back and re-reads the list', async () => {
    const { port, token } = server
    await server.close()
    await page.getByRole('status').waitFor()
    expect(await page.getByRole('status').textContent()).toMatch(/reconnecting/)
    runs.splice(0, runs.length, summary({ id: 'run-2', name: 'after restart', status: 'queued', step: 0, lastLoss: null }))
    server = await restartableServer(port, token)
    await page.locator('tr[data-run-id="run-2"]').waitFor({ timeout: 30_000 })
    await page.getByRole('status').waitFor({ state: 'detached' })
    expect(await page.locator('tbody tr').count()).toBe(1)
    await page.screenshot({ path: join(artifacts, 'runs-after-reconnect.png') })
  })

  it('ran without script errors or CSP violations', () => {
    expect(pageProblems).toEqual([])
  })
})
