// The Runs table in Chromium against the real host: the empty state, real short trainings appearing
// live with sparklines, filter and sort, and delete behind a confirmation.
import type { Page } from 'playwright-core'
import { describe, expect, it } from 'vitest'

import { openApp, screenshot, startTraining, tinyRunSpec, waitForStatus, waitForTestId, withWorkbenchAndBrowser, type Browser, type Workbench } from './harness'

let wb: Workbench
let browser: Browser
let page: Page

withWorkbenchAndBrowser((started) => ({ wb, browser, page } = started))

const rowOf = (id: string) => page.locator(`tr[data-run-id="${id}"]`)

describe('Runs view', () => {
  it('teaches the next step when there are no runs', async () => {
    await openApp(page, wb, '#/runs')
    const empty = await waitForTestId(page, 'runs-empty')
    expect(await empty.textContent()).toContain('New run')
    expect(await page.title()).toBe('Runs · MoE Workbench')
    await screenshot(page, 'runs-empty-state')
  })

  it('shows real runs live, with loss sparklines, and filters and sorts them', async () => {
    const alpha = await startTraining(wb, tinyRunSpec('alpha baseline', { train: { steps: 12, checkpoint_every: 0 } }))
    const beta = await startTraining(wb, tinyRunSpec('beta top1', { model: { top_k: 1 }, train: { steps: 12, checkpoint_every: 0 } }))
    await rowOf(alpha.id).waitFor()
    await rowOf(beta.id).waitFor()
    await waitForStatus(wb, beta.id, 'finished')
    await expect.poll(() => rowOf(beta.id).textContent(), { timeout: 30_000 }).toContain('finished')
    expect(await rowOf(alpha.id).textContent()).toContain('12 / 12')
    // A page opened after the runs finished reads each sparkline from metrics.series.
    await page.reload()
    await expect.poll(() => rowOf(alpha.id).locator('svg.sparkline path').count(), { timeout: 15_000 }).toBe(1)

    await page.getByLabel('Filter runs').fill('top1')
    await expect.poll(() => page.locator('tbody tr').count()).toBe(1)
    expect(await rowOf(beta.id).count()).toBe(1)
    await page.getByLabel('Filter runs').fill('')
    await page.getByLabel('Status').selectOption('running')
    await page.getByTestId('runs-none-match').waitFor()
    await page.getByLabel('Status').selectOption('all')

    const nameHeader = page.locator('th', { hasText: 'Name' })
    await nameHeader.getByRole('button').click()
    expect(await nameHeader.getAttribute('aria-sort')).toBe('ascending')
    expect(await page.locator('tbody tr').first().getAttribute('data-run-id')).toBe(alpha.id)
    await nameHeader.getByRole('button').click()
    expect(await page.locator('tbody tr').first().getAttribute('data-run-id')).toBe(beta.id)
    await screenshot(page, 'runs')
  })

  it('deletes a run only after confirming', async () => {
    const [run] = await wb.handlers['runs.list']({})
    const row = rowOf(run!.id)
    await row.locator('[data-action="delete"]').click()
    const dialog = page.getByRole('dialog')
    await dialog.waitFor()
    await screenshot(page, 'runs-delete-confirm')
    await dialog.getByRole('button', { name: 'Cancel' }).click()
    expect(await row.count()).toBe(1)
    await row.locator('[data-action="delete"]').click()
    await page.getByRole('dialog').getByRole('button', { name: 'Delete run' }).click()
    await row.waitFor({ state: 'detached' })
    expect((await wb.handlers['runs.list']({})).map((r) => r.id)).not.toContain(run!.id)
  })

  it('ran without script errors or CSP violations', () => {
    expect(browser.problems).toEqual([])
  })
})
