// The Replay view in Chromium against the real host: a real short training (no placement or offload
// recorded, so the view says so) and a small synthetic run written through the telemetry store with
// placement, tiers, pins and spills. Checks the keyboard map, the slider, the layer pick, spike jumps
// and playback by the step the view marks.
import type { Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

import { writeSyntheticRun } from '../bench/replay-dataset'
import { launchBrowser, openApp, screenshot, startTraining, startWorkbench, tinyRunSpec, waitForStatus, waitForTestId, type Browser, type Workbench } from './harness'

const SYNTHETIC = 'synthetic-placed'

let wb: Workbench
let browser: Browser
let page: Page
let trained: string

beforeAll(async () => {
  wb = await startWorkbench()
  browser = await launchBrowser()
  page = browser.page
  const run = await startTraining(wb, tinyRunSpec('replayed run', { train: { steps: 60, checkpoint_every: 0 } }))
  trained = run.id
  writeSyntheticRun(wb.host.store, wb.dataDir, SYNTHETIC, { steps: 400, layers: 3, experts: 16, devices: 4 })
  await waitForStatus(wb, trained, 'finished')
})

afterAll(async () => {
  await browser?.close()
  await wb?.close()
})

const stepShown = async () => Number((await page.getByTestId('replay-step').textContent())?.match(/step ([\d,]+)/)?.[1]?.replace(/,/g, ''))
const markedStep = () => page.getByTestId('replay-heatmap-marker').getAttribute('data-step').then(Number)
const press = async (key: string) => {
  await page.keyboard.press(key)
}

describe('Replay view', () => {
  it('opens at the step and layer of the URL with the heatmap marked there', async () => {
    await openApp(page, wb, `#/replay/${trained}?layer=1&step=20`)
    await waitForTestId(page, 'replay-heatmap-marker')
    expect(await stepShown()).toBe(20)
    expect(await markedStep()).toBe(20)
    expect(await page.getByTestId('replay-layer').inputValue()).toBe('1')
    expect(await page.getByTestId('replay-help').textContent()).toContain('previous / next spike')
  })

  it('says what this run did not record instead of drawing it', async () => {
    expect(await (await waitForTestId(page, 'replay-placement-missing')).textContent()).toContain('Placement is not recorded')
    expect(await (await waitForTestId(page, 'replay-not-recorded')).textContent()).toContain('tiers (offload), pins, spills, placement')
    expect(await page.locator('.replay-experts .expert').count()).toBe(4)
    await screenshot(page, 'replay-trained-run')
  })

  it('steps with the arrow keys (Shift for ten) and the slider, moving the marker', async () => {
    await page.locator('#replay-title').click()
    await press('ArrowRight')
    await expect.poll(stepShown).toBe(21)
    await press('Shift+ArrowRight')
    await expect.poll(stepShown).toBe(31)
    await press('Shift+ArrowLeft')
    await press('ArrowLeft')
    await expect.poll(stepShown).toBe(20)
    await expect.poll(markedStep).toBe(20)
    await page.getByTestId('replay-slider').fill('45')
    await expect.poll(stepShown).toBe(45)
    await expect.poll(markedStep).toBe(45)
    // The slider's own arrow keys are the replay's: one step per press, not two.
    await page.getByTestId('replay-slider').focus()
    await press('ArrowRight')
    await expect.poll(stepShown).toBe(46)
  })

  it('switches layers with [ and ] and the picker', async () => {
    await page.locator('#replay-title').click()
    await press('[')
    await expect.poll(() => page.getByTestId('replay-layer').inputValue()).toBe('0')
    await press('[') // already the first layer
    await press(']')
    await expect.poll(() => page.getByTestId('replay-layer').inputValue()).toBe('1')
    await page.getByTestId('replay-layer').selectOption('0')
    await expect.poll(() => page.getByTestId('replay-layer').inputValue()).toBe('0')
    await expect.poll(stepShown).toBe(46) // the step stays
  })

  it('plays and pauses with Space', async () => {
    await page.locator('#replay-title').click()
    await press('Home') // not a shortcut: nothing happens
    const before = await stepShown()
    await press(' ')
    await expect.poll(() => page.getByTestId('replay-play').textContent()).toContain('Pause')
    await expect.poll(stepShown).toBeGreaterThan(before)
    await press(' ')
    await expect.poll(() => page.getByTestId('replay-play').textContent()).toContain('Play')
  })

  it('jumps between imbalance spikes with PageDown / PageUp and an adjustable threshold', async () => {
    await openApp(page, wb, `#/replay/${SYNTHETIC}?layer=2&step=1`)
    await waitForTestId(page, 'replay-heatmap-marker')
    await expect.poll(() => page.getByTestId('replay-spike-count').textContent()).toMatch(/^[1-9]\d* spikes/)
    await page.locator('#replay-title').click()
    await press('PageDown')
    await expect.poll(stepShown).toBeGreaterThan(1)
    const first = await stepShown()
    await press('PageDown')
    await expect.poll(stepShown).toBeGreaterThan(first)
    await press('PageUp')
    await expect.poll(stepShown).toBe(first)
    const spikesAtP95 = Number((await page.getByTestId('replay-spike-count').textContent())?.match(/\d+/)?.[0])
    await page.getByTestId('replay-threshold').fill('1000')
    await page.getByTestId('replay-threshold').press('Enter')
    await expect.poll(() => page.getByTestId('replay-spike-count').textContent()).toBe('0 spikes')
    expect(await page.getByTestId('replay-next-spike').isDisabled()).toBe(true)
    await page.getByRole('button', { name: 'p95' }).click()
    await expect.poll(() => page.getByTestId('replay-spike-count').textContent()).toBe(`${spikesAtP95} spikes`)
  })

  it('shows devices, tiers, pins and spills where the run recorded them', async () => {
    await expect.poll(() => page.locator('.replay-experts .expert').count()).toBe(16)
    expect(await page.getByTestId('replay-placement-missing').count()).toBe(0)
    expect(await page.getByTestId('replay-not-recorded').count()).toBe(0)
    expect(await page.locator('.replay-experts .expert[data-pinned="1"]').count()).toBe(4)
    expect(await page.locator('.replay-experts .expert.tier-SSD').count()).toBe(2)
    await page.getByTestId('replay-zoom').selectOption('200')
    await expect.poll(() => page.locator('.replay-heatmap').textContent()).not.toContain('columns of')
    await screenshot(page, 'replay-synthetic-run')
  })

  it('ran without script errors', () => {
    expect(browser.problems).toEqual([])
  })
})
