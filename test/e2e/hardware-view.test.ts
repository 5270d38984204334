// The Hardware view and the shell's keyboard shortcuts in Chromium against the real host.
import type { Page } from 'playwright-core'
import { describe, expect, it } from 'vitest'

import { openApp, screenshot, waitForTestId, withWorkbenchAndBrowser, type Browser, type Workbench } from './harness'

let wb: Workbench
let browser: Browser
let page: Page

withWorkbenchAndBrowser((started) => ({ wb, browser, page } = started))

describe('Hardware view', () => {
  it('shows the CPU, its SIMD paths, memory, the data disk, GPUs and backends', async () => {
    const probe = await wb.handlers['hardware.probe']({})
    await openApp(page, wb, '#/hardware')
    const panel = await waitForTestId(page, 'hardware')
    const text = (await panel.textContent()) ?? ''
    expect(text).toContain(probe.cpuModel)
    for (const feature of probe.cpuFeatures) expect(text).toContain(feature)
    // Which kernels run, as the engine itself says (the bf16 one: AMX, AVX512_BF16, or emulated).
    const cpu = probe.engineBackends.find((b) => b.name === 'cpu')!
    expect(await page.getByTestId('cpu-kernels').textContent()).toContain(cpu.kernels)
    // The note that bf16 is not faster than fp32 shows exactly where the engine says its bf16 is not native.
    expect(await page.getByTestId('bf16-emulated').count()).toBe(cpu.bf16Native ? 0 : 1)
    expect(text).toContain(wb.dataDir)
    if (probe.gpus.length === 0) expect(await page.getByTestId('no-gpu').textContent()).toContain('CPU backend is in use')
    expect(await page.title()).toBe('Hardware · MoE Workbench')
    await screenshot(page, 'hardware')
  })

  it('opens the shortcut help with ? and navigates with g r', async () => {
    await page.locator('body').press('?')
    const help = page.getByRole('dialog', { name: 'Keyboard shortcuts' })
    await help.waitFor()
    await page.keyboard.press('Escape')
    await help.waitFor({ state: 'hidden' })
    await page.keyboard.press('g')
    await page.keyboard.press('r')
    await expect.poll(() => page.url()).toContain('#/runs')
  })

  it('ran without script errors or CSP violations', () => {
    expect(browser.problems).toEqual([])
  })
})
