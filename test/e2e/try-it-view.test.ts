// Try it in Chromium against the real host: a run fine-tuned from a model folder answers a prompt beside its base
// model (before/after), streamed token by token, each token showing the experts every MoE layer chose for it; the
// same folder answers alone with its experts in the SSD tier, greedily the same text as the base model.
import { join } from 'node:path'

import type { Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

import type { ChatDoneEvent, RunSummary } from '../../main/api/contract'
import { loadEngineAddon } from '../../main/host/engine/addon'
import { launchBrowser, openApp, screenshot, startTraining, startWorkbench, tinyRunSpec, waitForStatus, waitForTestId, type Browser, type Workbench } from './harness'

let wb: Workbench
let browser: Browser
let page: Page
let run: RunSummary
let baseDir: string

beforeAll(async () => {
  wb = await startWorkbench()
  browser = await launchBrowser()
  page = browser.page
  // The base model: random weights of the tiny e2e shape, saved as a model folder the run starts from.
  const spec = tinyRunSpec('tuned', { train: { steps: 10, checkpoint_every: 5, lr: 3e-3 } })
  baseDir = join(wb.tempDir('moe-e2e-base-'), 'base')
  new (loadEngineAddon().Engine)(JSON.stringify(spec.config)).saveCheckpoint(baseDir)
  run = await startTraining(wb, { ...spec, init: baseDir })
  await waitForStatus(wb, run.id, 'finished')
})

afterAll(async () => {
  await browser?.close()
  await wb?.close()
})

const doneText = (id: string) =>
  (wb.events.find((e) => e.name === 'chat.done' && (e.payload as ChatDoneEvent).id === id)?.payload as ChatDoneEvent | undefined)?.text

async function answerOf(i: number) {
  const panel = page.getByTestId(`answer-${i}`)
  await expect.poll(() => panel.getByTestId('answer-end').textContent(), { timeout: 60_000 }).toMatch(/tokens \(/)
  return panel
}

describe('Try it view', () => {
  it('answers with the base model and the fine-tuned checkpoint side by side, token by token', async () => {
    await openApp(page, wb, `#/try/${run.id}`)
    await waitForTestId(page, 'try-form')
    await expect.poll(() => page.getByTestId('try-run').inputValue()).toBe(run.id)
    expect(await page.getByTestId('try-before-after').isChecked()).toBe(true)
    await page.getByTestId('try-prompt').fill('def main():')
    await page.getByTestId('try-max-tokens').fill('12')
    await page.getByTestId('try-ask').click()
    const base = await answerOf(0)
    const tuned = await answerOf(1)
    expect(await base.locator('h3').textContent()).toContain(`base of run ${run.id}`)
    expect(await tuned.locator('h3').textContent()).toBe(`run ${run.id} step 10`)
    for (const panel of [base, tuned]) {
      expect(await panel.getByTestId('answer-end').textContent()).toMatch(/^12 tokens \(max tokens reached/)
      await expect.poll(() => panel.locator('.token').count()).toBe(12)
      // Every token carries each MoE layer's two experts of four.
      for (const title of await panel.locator('.token').evaluateAll((els) => els.map((e) => e.getAttribute('title'))))
        expect(title).toMatch(/^L0: [0-3], [0-3] · L1: [0-3], [0-3]$/)
    }
    // The page shows exactly the text the host streamed.
    const ids = wb.events.filter((e) => e.name === 'chat.done').map((e) => (e.payload as ChatDoneEvent).id)
    expect(ids).toHaveLength(2)
    const shown = [await base.getByTestId('answer-text').getAttribute('data-text'), await tuned.getByTestId('answer-text').getAttribute('data-text')]
    expect(shown.sort()).toEqual(ids.map((id) => doneText(id)).sort())
    // Clicking a token shows its experts per layer.
    await tuned.locator('.token').nth(3).click()
    const table = await waitForTestId(page, 'token-experts')
    expect(await table.locator('tbody tr').count()).toBe(2)
    expect(await table.locator('tbody tr td').first().textContent()).toBe('0')
    await screenshot(page, 'try-it')
  })

  it('answers from a model folder with its experts in the SSD tier, as the base model did', async () => {
    const baseText = await page.getByTestId('answer-0').getByTestId('answer-text').getAttribute('data-text')
    await openApp(page, wb, `#/try?dir=${encodeURIComponent(baseDir)}`)
    await waitForTestId(page, 'try-form')
    await page.getByTestId('try-prompt').fill('def main():')
    await page.getByTestId('try-max-tokens').fill('12')
    await page.getByTestId('try-experts').selectOption('ssd')
    await page.getByTestId('try-ask').click()
    const only = await answerOf(0)
    expect(await page.getByTestId('answer-1').count()).toBe(0)
    expect(await only.getByTestId('answer-text').getAttribute('data-text')).toBe(baseText)
    expect(browser.problems).toEqual([])
  })

  it('answers in bf16 precision the same with its experts resident or in the SSD tier', async () => {
    const answer = async (experts: string) => {
      await openApp(page, wb, `#/try?dir=${encodeURIComponent(baseDir)}`)
      await waitForTestId(page, 'try-form')
      await page.getByTestId('try-prompt').fill('def main():')
      await page.getByTestId('try-max-tokens').fill('12')
      await page.getByTestId('try-experts').selectOption(experts)
      await page.getByTestId('try-precision').selectOption('bf16')
      await page.getByTestId('try-ask').click()
      return (await answerOf(0)).getByTestId('answer-text').getAttribute('data-text')
    }
    const resident = await answer('resident')
    expect(resident).toBeTruthy()
    expect(await answer('ssd')).toBe(resident)
    expect(browser.problems).toEqual([])
  })
})
