// Placement across devices in Chromium against the real host: the New-run form's Placement section shows
// what the device count and policy use, and a tiny run started from it with 4 devices, least-loaded and a
// hot routing skew (90% of first choices on expert 0) fills Replay's device imbalance, its tokens per device
// and the expert grid's device colours.
import type { Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

import { fillTinyRunForm, formInput, launchBrowser, openApp, screenshot, startWorkbench, waitForStatus, waitForTestId, type Browser, type Workbench } from './harness'

let wb: Workbench
let browser: Browser
let page: Page
let id: string

const input = (path: string) => formInput(page, path)
const shown = () =>
  page.locator('[data-section="placement"] [data-field]').evaluateAll((fields) => fields.map((f) => f.getAttribute('data-field')))

beforeAll(async () => {
  wb = await startWorkbench()
  browser = await launchBrowser()
  page = browser.page
})

afterAll(async () => {
  await browser?.close()
  await wb?.close()
})

describe('placement in the workbench', () => {
  it('shows the placement fields the device count and policy use', async () => {
    await fillTinyRunForm(page, wb, 'placed', { 'train.steps': '20', 'train.checkpoint_every': '0' })
    expect(await page.locator('[data-section="placement"] legend').textContent()).toBe('Placement (devices)')
    expect(await shown()).toEqual(['placement.devices'])
    await input('placement.devices').fill('4')
    await expect.poll(shown).toEqual(['placement.devices', 'placement.policy'])
    await input('placement.policy').selectOption('least-loaded')
    await expect.poll(shown).toEqual(['placement.devices', 'placement.policy', 'placement.lambda', 'placement.alpha', 'placement.min_tokens'])
  })

  it('starts a placed, skewed run from the form, recorded with its placement', async () => {
    await input('routing_skew.distribution').selectOption('hot')
    await input('routing_skew.hot_fraction').fill('0.9')
    await page.getByTestId('start-run').click()
    await page.waitForURL(/#\/run\//)
    id = decodeURIComponent(new URL(page.url()).hash.replace(/^#\/run\//, ''))
    const { config } = await wb.handlers['runs.get']({ id })
    expect(config.placement).toEqual({ devices: 4, policy: 'least-loaded', lambda: 1.3, alpha: 1.1, min_tokens: 32 })
    expect(config.routing_skew).toMatchObject({ distribution: 'hot', hot_fraction: 0.9 })
    await waitForStatus(wb, id, 'finished', 120_000)
    const series = await wb.handlers['metrics.placement']({ id, layer: 0, maxPoints: 2000 })
    expect(series.steps).toHaveLength(20)
    // Expert 0's static home carries most of the tokens.
    expect(Math.min(...series.imbalanceBefore)).toBeGreaterThan(1.3)
  })

  it('charts the device imbalance, the tokens per device and each expert’s device in Replay', async () => {
    await openApp(page, wb, `#/replay/${id}?layer=1&step=10`)
    const imbalance = await waitForTestId(page, 'replay-placement-imbalance')
    await imbalance.locator('canvas').first().waitFor({ timeout: 30_000 })
    await expect.poll(() => imbalance.getAttribute('data-points')).toBe('20')
    const devices = await waitForTestId(page, 'replay-devices')
    await devices.locator('canvas').first().waitFor()
    await expect.poll(() => page.getByTestId('replay-device-summary').textContent()).toMatch(/^max\/mean \d+\.\d\d → \d+\.\d\d · [\d,]+ tokens spilled · \d+ weight cop(y|ies)$/)
    expect(await page.getByTestId('replay-placement-missing').count()).toBe(0)
    expect(await page.getByTestId('replay-device-legend').locator('.swatch').count()).toBe(4)
    // Every expert of the tiny model gets tokens under this skew, so each has a device 0 … 3.
    const placed = await page.locator('.replay-experts .expert').evaluateAll((cells) => cells.map((c) => c.getAttribute('data-device')))
    expect(placed).toHaveLength(4)
    for (const device of placed) expect(['0', '1', '2', '3']).toContain(device)
    await page.waitForTimeout(300)
    await screenshot(page, 'replay-placement')
  })

  it('ran without script errors', () => {
    expect(browser.problems).toEqual([])
  })
})
