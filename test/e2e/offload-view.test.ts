// Expert offload in Chromium against the real host: the New-run form's Offload section shows what the
// chosen mode uses, a budget typed in binary units moves the pre-flight verdict to "auto → host" with its
// slots and formulas, and a host-offloaded run (expert_slots 2) of the tiny shapes started from the form
// fills the Run view's offload charts and lists its settings.
import type { Page } from 'playwright-core'
import { describe, expect, it } from 'vitest'

import { RunConfigSchema } from '../../main/api/config'
import { planRun } from '../../main/host/planner/plan'
import { fillTinyRunForm, formInput, screenshot, waitForStatus, waitForTestId, withWorkbenchAndBrowser, type Browser, type Workbench } from './harness'

let wb: Workbench
let browser: Browser
let page: Page

const TINY_CONFIG = RunConfigSchema.parse({
  model: { arch: 'mixtral', vocab_size: 256, d_model: 64, n_layers: 2, n_heads: 4, n_kv_heads: 4, max_seq_len: 32, d_ff: 128, expert_d_ff: 128, n_experts: 4, top_k: 2 },
  train: { batch_size: 4, seq_len: 32 },
})

const input = (path: string) => formInput(page, path)
const nullBox = (path: string) => page.locator(`[data-null-for="${path}"]`)
const shown = (path: string) => page.locator(`[data-field="${path}"]`).count()
const text = (testId: string) => page.getByTestId(testId).textContent()

withWorkbenchAndBrowser((started) => ({ wb, browser, page } = started))

describe('expert offload in the workbench', () => {
  it('shows the offload fields the mode uses', async () => {
    await fillTinyRunForm(page, wb, 'offloaded', { 'train.steps': '40', 'train.checkpoint_every': '0' })
    expect(await input('offload.mode').inputValue()).toBe('none')
    expect(await shown('offload.expert_slots')).toBe(0)
    await input('offload.mode').selectOption('ssd')
    expect(await shown('offload.cache_experts')).toBe(1)
    expect(await shown('offload.lfu_decay')).toBe(0)
    await input('offload.cache_policy').selectOption('lfu')
    expect(await shown('offload.lfu_decay')).toBe(1)
    await input('offload.mode').selectOption('host')
    expect(await shown('offload.cache_experts')).toBe(0)
    // host without slots or a budget is refused next to expert_slots
    await page.locator('[data-issues-for="offload.expert_slots"]').waitFor()
  })

  it('plans auto → host once a device budget leaves resident training short', async () => {
    const resident = planRun(TINY_CONFIG, { device: 2 ** 40, host: 2 ** 40, ssd: null }).tiers[0]!.total
    await input('offload.mode').selectOption('auto')
    await expect.poll(() => text('plan-mode')).toContain('auto → none')
    await nullBox('offload.device_budget_bytes').uncheck()
    await input('offload.device_budget_bytes').fill(String(resident - 1))
    await expect.poll(() => text('plan-mode'), { timeout: 15_000 }).toContain('auto → host')
    expect(await text('plan-verdict')).toContain('Fits')
    expect(await text('plan-capacity')).toMatch(/\d+ expert slots on the device/)
    expect(await text('plan-explanation')).toMatch(/^auto → host: resident needs/)
    expect(await page.locator('[data-tier="host"]').count()).toBe(1)
    await page.getByTestId('plan-formulas').locator('summary').click()
    expect(await text('plan-formulas')).toContain('device = 4·D + 2·slots·e + activations + buffers')
    // A budget typed in binary units reads back as bytes.
    await input('offload.device_budget_bytes').fill('1 GiB')
    await expect.poll(() => text('plan-mode')).toContain('auto → none')
    expect(await page.locator('[data-field="offload.device_budget_bytes"] output').textContent()).toBe('1.00 GiB')
    await page.evaluate(() => (globalThis as unknown as { scrollTo(x: number, y: number): void }).scrollTo(0, 0))
    await screenshot(page, 'new-run-offload')
  })

  it('starts a host-offloaded run from the form and fills its offload charts', async () => {
    await input('offload.mode').selectOption('host')
    await nullBox('offload.device_budget_bytes').check()
    await nullBox('offload.expert_slots').uncheck()
    await input('offload.expert_slots').fill('2')
    await expect.poll(() => text('plan-capacity')).toContain('2 expert slots on the device')
    await page.getByTestId('start-run').click()
    await page.waitForURL(/#\/run\//)
    const id = decodeURIComponent(new URL(page.url()).hash.replace(/^#\/run\//, ''))
    const { config, offload } = await wb.handlers['runs.get']({ id })
    expect(config.offload).toMatchObject({ mode: 'host', expert_slots: 2, device_budget_bytes: null })
    expect(offload).toMatchObject({ requested: 'host', mode: 'host', slots: 2 })
    await waitForTestId(page, 'offload-section')
    for (const chart of ['chart-offload-peaks', 'chart-offload-bytes', 'chart-offload-time'])
      await page.getByTestId(chart).locator('canvas').first().waitFor({ timeout: 60_000 })
    expect(await text('offload-settings')).toContain('host')
    expect(await text('chart-offload-cache')).toContain('Only the SSD tier')
    await waitForStatus(wb, id, 'finished', 120_000)
    const series = await wb.handlers['metrics.series']({ id, metrics: ['peak_device_bytes', 'bytes_h2d'], maxPoints: 2000 })
    expect(series.values['bytes_h2d']!.every((v) => v !== null && v > 0)).toBe(true)
    await page.waitForTimeout(600)
    await screenshot(page, 'run-offload')
  })

  it('ran without script errors', () => {
    expect(browser.problems).toEqual([])
  })
})
