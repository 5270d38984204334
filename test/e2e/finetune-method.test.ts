// The Method section of New run in Chromium against the real host: ESFT measures the experts' shares with the
// engine and shows the layer × expert heatmap with the chosen experts outlined; clicking a cell edits the set and
// the planner's verdict follows; LoRA's fields validate next to themselves and the verdict counts the adapters.
import type { Page } from 'playwright-core'
import { describe, expect, it } from 'vitest'

import { fillTinyRunForm, screenshot, waitForTestId, withWorkbenchAndBrowser, type Workbench } from './harness'

let wb: Workbench
let page: Page

withWorkbenchAndBrowser((started) => ({ wb, page } = started))

const trainable = async () => Number((await page.getByTestId('method-trainable').textContent())?.replace(/,/g, ''))
const pressed = (layer: number, e: number) => page.getByTestId(`esft-cell-${layer}-${e}`).getAttribute('aria-pressed')

describe('Method section', () => {
  it('starts as full training, with the router training', async () => {
    await fillTinyRunForm(page, wb, 'esft run')
    const section = await waitForTestId(page, 'method-section')
    expect(await page.getByTestId('method-full').isChecked()).toBe(true)
    expect(await page.getByTestId('router-state').textContent()).toBe('trains')
    expect(await section.getByTestId('method-verdict').count()).toBe(0) // no finetune section: the plan as before
  })

  it('ESFT: measures, outlines the chosen experts, and a click edits the set', async () => {
    await page.getByTestId('method-esft').check()
    expect(await page.getByTestId('router-state').textContent()).toBe('frozen')
    expect(await page.getByTestId('group-experts').isChecked()).toBe(true)
    await page.getByTestId('esft-batches').fill('2')
    await page.getByTestId('esft-batches').dispatchEvent('change')
    await page.getByTestId('esft-threshold').fill('0.5')
    await page.getByTestId('esft-threshold').dispatchEvent('change')
    await page.getByTestId('esft-measure').click()
    await waitForTestId(page, 'esft-heatmap', 60_000)
    // Two MoE layers of four experts; per layer the outlined experts reach p = 0.5, and fewer than all do.
    let chosen = 0
    for (const layer of [0, 1]) {
      const states = await Promise.all([0, 1, 2, 3].map((e) => pressed(layer, e)))
      const inLayer = states.filter((s) => s === 'true').length
      expect(inLayer).toBeGreaterThan(0)
      expect(inLayer).toBeLessThan(4)
      chosen += inLayer
      const reached = Number((await page.getByTestId(`esft-reached-${layer}`).textContent())?.replace('%', ''))
      expect(reached).toBeGreaterThanOrEqual(50)
    }
    // The verdict counts exactly the chosen experts' weights (gate, up, down of d_ff 128 over d_model 64), and
    // one more after a click on an expert left out.
    const perExpert = 3 * 128 * 64
    await expect.poll(trainable).toBe(chosen * perExpert)
    const off = (await Promise.all([0, 1, 2, 3].map((e) => pressed(0, e)))).indexOf('false')
    await page.getByTestId(`esft-cell-0-${off}`).click()
    expect(await pressed(0, off)).toBe('true')
    await expect.poll(trainable).toBe((chosen + 1) * perExpert)
    await screenshot(page, 'new-run-esft')
  })

  it('LoRA: fields validate in place and the verdict counts adapters', async () => {
    await page.getByTestId('method-lora').check()
    await waitForTestId(page, 'lora-fields')
    await page.getByTestId('lora-rank').fill('0')
    await page.getByTestId('lora-rank').dispatchEvent('change')
    const issue = page.locator('[data-issues-for="finetune.lora.rank"]')
    await issue.waitFor()
    expect(await issue.textContent()).toContain('must be at least 1')
    expect(await page.getByTestId('start-run').isDisabled()).toBe(true)
    await page.getByTestId('lora-rank').fill('4')
    await page.getByTestId('lora-rank').dispatchEvent('change')
    await expect.poll(() => issue.count()).toBe(0)
    await expect.poll(() => page.getByTestId('method-verdict').textContent()).toMatch(/in LoRA adapters/)
    // Rank 4 on q, k, v, o (64 → 64 each) and every expert's gate, up, down (64 ↔ 128): per layer
    // 4·4·(64+64) + 4 experts · 3 · 4·(64+128), over 2 layers.
    await expect.poll(trainable).toBe(2 * (4 * 4 * 128 + 4 * 3 * 4 * 192))
  })
})
