// The Run view in Chromium against a real training: live charts, pause, resume and stop, the
// heatmap's layer picker, the event log, the title and the theme switch. The run is long enough
// (tiny steps take milliseconds) that the controls act on it while it trains.
import type { Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

import type { RunSummary } from '../../main/api/contract'
import { launchBrowser, openApp, screenshot, startTraining, startWorkbench, tinyRunSpec, waitForStatus, waitForStep, type Browser, type Workbench } from './harness'

let wb: Workbench
let browser: Browser
let page: Page
let run: RunSummary

beforeAll(async () => {
  wb = await startWorkbench()
  browser = await launchBrowser()
  page = browser.page
  run = await startTraining(wb, tinyRunSpec('live run', { train: { steps: 100_000, checkpoint_every: 0 } }))
})

afterAll(async () => {
  await browser?.close()
  await wb?.close()
})

const canvasIn = (testId: string) => page.getByTestId(testId).locator('canvas').first()

describe('Run view', () => {
  it('draws live charts while the run trains', async () => {
    await waitForStep(wb, run.id, 3)
    await openApp(page, wb, `#/run/${run.id}`)
    await canvasIn('chart-loss').waitFor({ timeout: 30_000 })
    await canvasIn('chart-step-time').waitFor()
    await canvasIn('chart-heatmap').waitFor()
    expect(await page.title()).toBe('Run live run · MoE Workbench')
    // A resident run has no offload section (offload-view.test.ts covers an offloaded one).
    expect(await page.getByTestId('offload-section').count()).toBe(0)
  })

  it('pauses, resumes and stops the run from its controls', async () => {
    await page.locator('[data-action="pause"]').click()
    await waitForStatus(wb, run.id, 'paused', 30_000)
    await page.locator('[data-action="resume"]').click()
    await waitForStatus(wb, run.id, 'running', 30_000)
    await expect.poll(() => page.getByTestId('event-log').textContent(), { timeout: 15_000 }).toContain('resumed')
    await page.waitForTimeout(1500) // a few more live steps
    await page.locator('[data-action="stop"]').click()
    await waitForStatus(wb, run.id, 'stopped', 60_000)
    await expect.poll(() => page.locator('#run-title').textContent(), { timeout: 15_000 }).toContain('stopped')
    await expect.poll(() => page.getByTestId('event-log').textContent(), { timeout: 15_000 }).toContain('stopped')
    await page.locator('[data-action="restart"]').waitFor() // a stopped run offers restart
  })

  it('switches heatmap layers, smoothing and themes', async () => {
    await page.getByTestId('heatmap-layer').selectOption('1')
    await canvasIn('chart-heatmap').waitFor()
    await page.getByTestId('smoothing').fill('0.9')
    await page.waitForTimeout(600) // chart animation
    await screenshot(page, 'run')

    const theme = () => page.evaluate(() => (globalThis as unknown as { document: { documentElement: { dataset: Record<string, string> } } }).document.documentElement.dataset['theme'])
    const before = await theme()
    for (let i = 0; i < 3 && (await theme()) === before; i++) await page.getByTestId('theme-toggle').click()
    expect(await theme()).not.toBe(before)
    await page.reload()
    await canvasIn('chart-loss').waitFor({ timeout: 30_000 })
    expect(await theme()).not.toBe(before) // the choice is kept
    await page.waitForTimeout(600)
    await screenshot(page, `run-${await theme()}`)
  })

  it('ran without script errors or CSP violations', () => {
    expect(browser.problems).toEqual([])
  })
})
