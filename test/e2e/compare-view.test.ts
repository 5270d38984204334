// Compare in Chromium against the real host: two short real trainings that differ in top_k, overlaid,
// with a diff table of only the differing field, a summary and the memory scatter.
import type { Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

import {
  launchBrowser,
  openApp,
  screenshot,
  startTraining,
  startWorkbench,
  tinyRunSpec,
  waitForStatus,
  waitForTestId,
  type Browser,
  type Workbench,
} from './harness'

let wb: Workbench
let browser: Browser
let page: Page
const ids: string[] = []

beforeAll(async () => {
  wb = await startWorkbench()
  browser = await launchBrowser()
  page = browser.page
  for (const topK of [1, 2]) {
    const run = await startTraining(wb, tinyRunSpec(`tiny · top_k=${topK}`, { model: { top_k: topK }, train: { steps: 12, checkpoint_every: 0 } }))
    ids.push(run.id)
  }
  for (const id of ids) await waitForStatus(wb, id, 'finished')
})

afterAll(async () => {
  await browser?.close()
  await wb?.close()
})

describe('Compare view', () => {
  it('teaches what to do with nothing picked', async () => {
    await openApp(page, wb, '#/compare')
    expect(await (await waitForTestId(page, 'compare-empty')).textContent()).toContain('Tick two or more runs')
  })

  it('picks runs from the list into the URL', async () => {
    const picker = await waitForTestId(page, 'compare-picker')
    for (const id of ids) await picker.locator(`input[value="${id}"]`).check()
    await expect.poll(() => new URL(page.url()).hash).toBe(`#/compare?ids=${encodeURIComponent(ids.join(','))}`)
  })

  it('overlays the runs, shows only the differing field and summarises them', async () => {
    const overlay = await waitForTestId(page, 'compare-overlay')
    await overlay.locator('canvas').first().waitFor()
    const diff = await waitForTestId(page, 'config-diff')
    const rows = await diff.locator('tbody tr').evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-path')))
    expect(rows).toEqual(['model.top_k'])
    expect(await diff.locator('tbody tr td').allTextContents()).toEqual(['1', '2'])
    const summary = await waitForTestId(page, 'compare-summary')
    const second = summary.locator(`tr[data-run-id="${ids[1]}"]`)
    await expect.poll(() => second.textContent()).toMatch(/×\d/)
    expect(await summary.locator('tbody tr').count()).toBe(2)
    await waitForTestId(page, 'compare-memory')
    await page.getByLabel('wall time').check()
    await page.getByTestId('compare-metric').selectOption('tokens_per_s')
    await page.getByTestId('compare-metric').selectOption('loss')
    await screenshot(page, 'compare')
  })

  it('ran without script errors', () => {
    expect(browser.problems).toEqual([])
  })
})
