// The demo's ablation set in Chromium against the real host, in reduced form (the e2e tiny model, 6 steps
// each): Compare with the set selected shows every run with the peak bytes per tier and the bytes moved the
// host recorded, and Replay shows an offloaded run's tiers and pins and a placed run's devices.
import type { Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

import { demoRunName, demoSetConfigs } from '../../main/host/catalog/demo-set'
import { launchBrowser, openApp, screenshot, startTraining, startWorkbench, tinyRunSpec, waitForStatus, waitForTestId, type Browser, type Workbench } from './harness'

let wb: Workbench
let browser: Browser
let page: Page
const ids: Record<string, string> = {}
const STEPS = 6

beforeAll(async () => {
  wb = await startWorkbench()
  browser = await launchBrowser({ width: 1400, height: 900 })
  page = browser.page
  const base = tinyRunSpec('demo base', { train: { steps: STEPS, checkpoint_every: 0 } })
  for (const { run, config } of demoSetConfigs(base.config)) {
    const created = await startTraining(wb, { ...base, name: demoRunName(run), config })
    ids[run.key] = created.id
  }
  for (const id of Object.values(ids)) await waitForStatus(wb, id, 'finished', 240_000)
}, 300_000)

afterAll(async () => {
  await browser?.close()
  await wb?.close()
})

const cellsOf = async (row: number) =>
  page.getByTestId('compare-summary').locator('tbody tr').nth(row).locator('td.numeric').allTextContents()

describe('the demo set', () => {
  it('opens in Compare with every run, the tier peaks and the bytes each strategy moved', async () => {
    await openApp(page, wb, `#/compare?ids=${Object.values(ids).join(',')}`)
    const summary = await waitForTestId(page, 'compare-summary')
    await expect.poll(() => summary.locator('tbody tr').count()).toBe(5)
    expect(await summary.locator('tbody th').allTextContents()).toEqual(Object.keys(ids).map((key) => `demo · ${key}`))
    // Columns: final loss, tokens/s, peak device, peak host, peak SSD, bytes moved, wall time.
    const [resident, host, ssd, placed] = [await cellsOf(0), await cellsOf(1), await cellsOf(2), await cellsOf(3)]
    expect(resident[2]).toMatch(/\d.*\*/) // the planner's booking, marked
    expect(resident[5]!.trim()).toBe('—') // moved nothing
    for (const offloaded of [host, ssd]) {
      expect(offloaded[2]).toMatch(/\d/)
      expect(offloaded[3]).toMatch(/\d/)
      expect(offloaded[5]).toMatch(/\d/)
    }
    expect(ssd[4]).toMatch(/\d/)
    expect(placed![5]).toMatch(/\d/)
    await page.getByTestId('compare-overlay').waitFor()
    await screenshot(page, 'compare-demo')
  })

  it('replays the offloaded run’s tiers and pins and the placed run’s devices', async () => {
    // One slot of four is pinned: to the hottest expert of the previous step, in whichever layer it is.
    const counts = async (layer: number) => {
      await openApp(page, wb, `#/replay/${ids['host offload']}?layer=${layer}&step=${STEPS}`)
      const experts = await waitForTestId(page, 'replay-experts')
      await expect.poll(() => experts.locator('.counts').textContent()).toMatch(/^\d+ pinned · \d+ spilled · [1-9]\d* offloaded$/)
      return Number((await experts.locator('.counts').textContent())!.match(/^(\d+) pinned/)![1])
    }
    const pinned = [await counts(0), await counts(1)]
    expect(pinned[0]! + pinned[1]!).toBeGreaterThan(0)
    await counts(pinned[0]! > 0 ? 0 : 1)
    await screenshot(page, 'replay-demo-offload')

    await openApp(page, wb, `#/replay/${ids['least-loaded placement']}?layer=0&step=${STEPS}`)
    await waitForTestId(page, 'replay-devices')
    await waitForTestId(page, 'replay-device-legend')
    expect(await page.getByTestId('replay-placement-missing').count()).toBe(0)
    await screenshot(page, 'replay-demo-placement')
  })
})
