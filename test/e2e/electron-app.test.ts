// The same workbench through Playwright's Electron launcher: the real Electron main process, preload
// bridge and window, where the Electron runtime is installed. Where it is not (these build machines
// cannot download it), the suite is skipped with a message; the browser-mode suite covers the views.
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'

import { _electron, type ElectronApplication, type Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

import type { RunSummary } from '../../main/api/contract'
import { ensureBuilt, repoRoot, screenshot, tinyRunSpec } from './harness'

// The binary the `electron` package would launch, without requiring the package (which, without its
// runtime, tries to download it).
function electronBinary(): string | null {
  const dir = dirname(createRequire(import.meta.url).resolve('electron/package.json'))
  const pathFile = join(dir, 'path.txt')
  if (!existsSync(pathFile)) return null
  const binary = join(dir, 'dist', readFileSync(pathFile, 'utf8').trim())
  return existsSync(binary) ? binary : null
}

const binary = electronBinary()
if (!binary)
  console.warn(
    'Electron runtime not installed (node_modules/electron/dist is missing): skipping the Electron-launcher suite; ' +
      'the browser-mode suite runs the same views in Chromium.',
  )

describe.skipIf(!binary)('the workbench in its Electron window', () => {
  let app: ElectronApplication
  let page: Page
  let dataDir: string

  beforeAll(async () => {
    await ensureBuilt()
    dataDir = mkdtempSync(join(tmpdir(), 'moe-electron-e2e-'))
    app = await _electron.launch({
      executablePath: binary!,
      args: [repoRoot],
      env: { ...process.env, MOE_WORKBENCH_HOME: dataDir },
    })
    page = await app.firstWindow()
  })

  afterAll(async () => {
    await app?.close()
    if (dataDir) rmSync(dataDir, { recursive: true, force: true })
  })

  it('opens one sandboxed window titled MoE Workbench on the Runs view', async () => {
    await page.waitForSelector('[data-testid="runs-empty"]')
    expect(await page.title()).toContain('MoE Workbench')
    expect(await page.evaluate(() => typeof (globalThis as { require?: unknown }).require)).toBe('undefined')
    await screenshot(page, 'electron-runs-empty')
  })

  it('trains a run requested through the preload bridge and shows it finished', async () => {
    const spec = tinyRunSpec('electron run', { train: { steps: 10 } })
    const created = await page.evaluate(
      (s) =>
        (globalThis as unknown as { api: { invoke: (n: string, p: unknown) => Promise<{ result?: RunSummary }> } }).api
          .invoke('runs.create', { spec: s }),
      spec,
    )
    const id = created.result!.id
    await page.waitForSelector(`tr[data-run-id="${id}"] >> text=finished`, { timeout: 120_000 })
    await screenshot(page, 'electron-runs-finished')
  })

  it('reaches every view from the navigation bar', async () => {
    for (const title of ['New run', 'Compare', 'Replay', 'Checkpoints', 'Hardware', 'Runs']) {
      await page.getByRole('link', { name: title, exact: true }).click()
      await page.waitForFunction((t) => (globalThis as unknown as { document: { title: string } }).document.title.startsWith(t), title)
    }
  })
})
