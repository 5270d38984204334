// The whole workbench in Chromium against the real host and real trainings: start a run from the
// New-run form and watch it move, stop it, train a second one, compare the two, scrub the second in
// Replay (keys and slider), export one of its checkpoints and find the files on disk. Every view is
// kept as a screenshot in test-artifacts/e2e/flow-*.png.
import { readdirSync } from 'node:fs'
import { join } from 'node:path'

import type { Page } from 'playwright-core'
import { describe, expect, it } from 'vitest'

import { fillTinyRunForm, openApp, screenshot, waitForStatus, waitForStep, waitForTestId, withWorkbenchAndBrowser, type Browser, type Workbench } from './harness'

let wb: Workbench
let browser: Browser
let page: Page
const ids: string[] = []

const scrollTop = () => page.evaluate(() => (globalThis as unknown as { scrollTo(x: number, y: number): void }).scrollTo(0, 0))

async function startFromForm(name: string, steps: number, checkpointEvery: number): Promise<string> {
  await fillTinyRunForm(page, wb, name, { 'train.steps': String(steps), 'train.checkpoint_every': String(checkpointEvery) })
  await expect.poll(() => page.getByTestId('plan-verdict').textContent()).toMatch(/Fits/)
  await scrollTop()
  await screenshot(page, 'flow-new-run')
  await page.getByTestId('start-run').click()
  await page.waitForURL(/#\/run\//)
  return decodeURIComponent(new URL(page.url()).hash.replace(/^#\/run\//, '').split('?')[0]!)
}

const stepShown = async () => Number((await page.getByTestId('replay-step').textContent())?.match(/step ([\d,]+)/)?.[1]?.replace(/,/g, ''))
const markedStep = () => page.getByTestId('replay-heatmap-marker').getAttribute('data-step').then(Number)

withWorkbenchAndBrowser((started) => ({ wb, browser, page } = started))

describe('workbench flow', () => {
  it('opens on the Runs view', async () => {
    await openApp(page, wb)
    await waitForTestId(page, 'new-run')
    await screenshot(page, 'flow-runs-empty')
  })

  it('starts a run from the New-run view and shows its values moving live', async () => {
    ids.push(await startFromForm('flow long run', 100_000, 0))
    await waitForTestId(page, 'run-charts')
    await page.getByTestId('chart-loss').locator('canvas').first().waitFor({ timeout: 30_000 })
    await waitForStep(wb, ids[0]!, 5)
    await openApp(page, wb, '#/runs')
    const row = page.locator(`tr[data-run-id="${ids[0]}"]`)
    await row.waitFor()
    const first = await row.textContent()
    await expect.poll(() => row.textContent(), { timeout: 30_000 }).not.toBe(first)
    expect(await row.textContent()).toContain('running')
    await screenshot(page, 'flow-runs-live')
  })

  it('stops it from the Run view', async () => {
    await openApp(page, wb, `#/run/${ids[0]}`)
    await page.getByTestId('chart-loss').locator('canvas').first().waitFor({ timeout: 30_000 })
    await screenshot(page, 'flow-run-live')
    await page.locator('[data-action="stop"]').click()
    await waitForStatus(wb, ids[0]!, 'stopped', 30_000)
    await expect.poll(() => page.locator('#run-title').textContent(), { timeout: 15_000 }).toContain('stopped')
    await screenshot(page, 'flow-run-stopped')
  })

  it('trains a second short run to the end', async () => {
    ids.push(await startFromForm('flow short run', 40, 10))
    const done = await waitForStatus(wb, ids[1]!, ['finished', 'failed'])
    expect(done.status).toBe('finished')
    await expect.poll(() => page.locator('#run-title').textContent(), { timeout: 15_000 }).toContain('finished')
    await screenshot(page, 'flow-run-finished')
  })

  it('compares the two runs', async () => {
    await openApp(page, wb, `#/compare?ids=${encodeURIComponent(ids.join(','))}`)
    const overlay = await waitForTestId(page, 'compare-overlay')
    await overlay.locator('canvas').first().waitFor()
    const summary = await waitForTestId(page, 'compare-summary')
    await expect.poll(() => summary.locator('tbody tr').count()).toBe(2)
    await screenshot(page, 'flow-compare')
  })

  it('scrubs the second run in Replay with keys and the slider', async () => {
    await openApp(page, wb, `#/replay/${ids[1]}`)
    await waitForTestId(page, 'replay-heatmap-marker')
    expect(await stepShown()).toBe(1)
    await page.locator('#replay-title').click()
    await page.keyboard.press('Shift+ArrowRight')
    await page.keyboard.press('ArrowRight')
    await expect.poll(stepShown).toBe(12)
    await expect.poll(markedStep).toBe(12)
    await page.getByTestId('replay-slider').fill('33')
    await expect.poll(markedStep).toBe(33)
    await page.keyboard.press(']')
    await expect.poll(() => page.getByTestId('replay-layer').inputValue()).toBe('1')
    await screenshot(page, 'flow-replay')
  })

  it('exports a checkpoint of the second run and writes config.json and model.safetensors', async () => {
    const target = join(wb.tempDir('moe-e2e-flow-export-'), 'hf')
    await openApp(page, wb, `#/checkpoints/${ids[1]}`)
    const table = await waitForTestId(page, 'checkpoints-table')
    await expect.poll(() => table.locator('tbody tr').count()).toBeGreaterThanOrEqual(4)
    await screenshot(page, 'flow-checkpoints')
    await page.locator('tr[data-step="20"] [data-action="export"]').click()
    await page.getByLabel('Export to directory').fill(target)
    await page.getByRole('button', { name: 'Export', exact: true }).click()
    const state = await waitForTestId(page, 'export-state')
    await expect.poll(() => state.textContent(), { timeout: 60_000 }).toMatch(/Exported to|failed/)
    expect(await state.textContent()).toContain(`Exported to ${target}`)
    const files = readdirSync(target)
    expect(files).toContain('config.json')
    expect(files).toContain('model.safetensors')
    await screenshot(page, 'flow-exported')
  })

  it('shows the hardware', async () => {
    await openApp(page, wb, '#/hardware')
    await page.locator('main h2').first().waitFor()
    await page.waitForLoadState('networkidle')
    await screenshot(page, 'flow-hardware')
  })

  it('ran without script errors', () => {
    expect(browser.problems).toEqual([])
  })
})
