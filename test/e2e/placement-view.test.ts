// Placement across devices in Chromium against the real host: the New-run form's Placement and Pipeline
// sections show what the device count, policy and partitions use, and a tiny run started from them with 4
// devices, least-loaded, 2 partitions with memory reuse S2 and a hot routing skew (90% of first choices on
// expert 0) fills Replay's device imbalance, its tokens per device, the expert grid's device colours, and how
// the layer ran on the devices (n, S2, critical against predicted ms, bytes moved, busy ms and peak bytes per
// device), the numbers the host recorded.
import type { Page } from 'playwright-core'
import { describe, expect, it } from 'vitest'

import { fillTinyRunForm, formInput, openApp, screenshot, waitForStatus, waitForTestId, withWorkbenchAndBrowser, type Browser, type Workbench } from './harness'

let wb: Workbench
let browser: Browser
let page: Page
let id: string

const input = (path: string) => formInput(page, path)
const shownIn = (section: string) => () =>
  page.locator(`[data-section="${section}"] [data-field]`).evaluateAll((fields) => fields.map((f) => f.getAttribute('data-field')))
const shown = shownIn('placement')
const DEVICE_FIELDS = ['placement.device_budget_bytes', 'placement.threads_per_device']

withWorkbenchAndBrowser((started) => ({ wb, browser, page } = started))

describe('placement in the workbench', () => {
  it('shows the placement fields the device count and policy use', async () => {
    await fillTinyRunForm(page, wb, 'placed', { 'train.steps': '20', 'train.checkpoint_every': '0' })
    expect(await page.locator('[data-section="placement"] legend').textContent()).toBe('Placement (devices)')
    expect(await shown()).toEqual(['placement.devices'])
    await input('placement.devices').fill('4')
    await expect.poll(shown).toEqual(['placement.devices', 'placement.policy', ...DEVICE_FIELDS])
    await input('placement.policy').selectOption('greedy')
    await expect.poll(shown).toEqual(['placement.devices', 'placement.policy', 'placement.greedy_split', ...DEVICE_FIELDS])
    await input('placement.policy').selectOption('least-loaded')
    await expect.poll(shown).toEqual(['placement.devices', 'placement.policy', 'placement.lambda', 'placement.alpha', 'placement.min_tokens', ...DEVICE_FIELDS])
  })

  it('shows the pipeline’s partitions and memory reuse, and the candidates only for auto', async () => {
    const pipeline = shownIn('pipeline')
    expect(await page.locator('[data-section="pipeline"] legend').textContent()).toBe('Pipeline (micro-batches)')
    expect(await pipeline()).toEqual(['pipeline.partitions', 'pipeline.memory_reuse'])
    const auto = page.locator('[data-word-for="pipeline.partitions"]')
    await auto.check()
    await expect.poll(pipeline).toEqual(['pipeline.partitions', 'pipeline.candidates', 'pipeline.memory_reuse'])
    expect(await input('pipeline.candidates').inputValue()).toBe('1, 2, 4, 8')
    await auto.uncheck()
    await expect.poll(pipeline).toEqual(['pipeline.partitions', 'pipeline.memory_reuse'])
    await input('pipeline.partitions').fill('65')
    await expect.poll(() => page.locator('[data-issues-for="pipeline.partitions"]').textContent()).toBe('must be a whole number in [1, 64] or "auto"')
    await input('pipeline.partitions').fill('2')
    await input('pipeline.memory_reuse').selectOption('S2')
    await page.locator('[data-section="placement"]').scrollIntoViewIfNeeded()
    await screenshot(page, 'new-run-placement')
  })

  it('starts a placed, skewed run from the form, recorded with its placement', async () => {
    await input('routing_skew.distribution').selectOption('hot')
    await input('routing_skew.hot_fraction').fill('0.9')
    await page.getByTestId('start-run').click()
    await page.waitForURL(/#\/run\//)
    id = decodeURIComponent(new URL(page.url()).hash.replace(/^#\/run\//, ''))
    const { config } = await wb.handlers['runs.get']({ id })
    expect(config.placement).toEqual({
      devices: 4, policy: 'least-loaded', lambda: 1.3, alpha: 1.1, min_tokens: 32, greedy_split: true, device_budget_bytes: null, threads_per_device: null,
    })
    expect(config.pipeline).toEqual({ partitions: 2, candidates: [1, 2, 4, 8], memory_reuse: 'S2' })
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

  it('shows how the layer ran on the devices at the step: n, the reuse strategy, predicted against critical ms, bytes, busy ms and peaks', async () => {
    // The view's formats: ms with 2 decimals below 10, else 1; bytes in binary units with 2 decimals below 10, else 1.
    const ms = (v: number) => `${v.toFixed(v < 10 ? 2 : 1)} ms`
    const bytes = (v: number) => {
      const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB']
      let unit = 0
      while (v >= 1024 && unit < units.length - 1) (v /= 1024), unit++
      return `${unit === 0 ? v : v.toFixed(v < 10 ? 2 : 1)} ${units[unit]}`
    }
    const summaryOf = (x: NonNullable<NonNullable<Awaited<ReturnType<Workbench['handlers']['metrics.stepLoads']>>['layers'][number]['devices']>['execution']>) =>
      `n = ${x.partitions} · memory reuse S${x.reuseStrategy} · critical ${ms(x.criticalMs)}, predicted ${ms(x.predictedMs)} ` +
      `(×${(x.predictedMs / x.criticalMs).toFixed(2)}) · wall ${ms(x.wallMs)}`
    const loads = await wb.handlers['metrics.stepLoads']({ id, step: 10 })
    const recorded = loads.layers[1]!.devices!.execution!
    expect(recorded).toMatchObject({ partitions: 2, reuseStrategy: 2 })
    expect(recorded.deviceBusyMs).toHaveLength(4)
    expect(recorded.criticalMs).toBeGreaterThan(0)
    expect(recorded.predictedMs).toBeGreaterThan(0)
    const summary = await waitForTestId(page, 'replay-execution-summary')
    await expect.poll(() => summary.textContent()).toBe(summaryOf(recorded))
    expect(await summary.getAttribute('data-partitions')).toBe('2')
    expect(await summary.getAttribute('data-reuse')).toBe('S2')
    expect(await page.getByTestId('replay-execution-bytes').textContent())
      .toBe(`moved: tokens ${bytes(recorded.tokenBytes)} · weights ${bytes(recorded.weightBytes)} · offloaded ${bytes(recorded.offloadBytes)}`)
    await page.getByTestId('replay-device-busy').locator('canvas').first().waitFor()
    const peaks = loads.devicePeakBytes!
    expect(peaks).toHaveLength(4)
    const top = peaks.indexOf(Math.max(...peaks))
    expect(await page.getByTestId('replay-device-peaks').textContent()).toBe(`peak ${bytes(peaks[top]!)} (dev ${top}), no budget`)
    await page.getByTestId('replay-device-peaks-chart').locator('canvas').first().waitFor()
    expect(await page.getByTestId('replay-execution-missing').count()).toBe(0)
    // The next step shows that step's numbers.
    const next = await wb.handlers['metrics.stepLoads']({ id, step: 11 })
    await page.keyboard.press('ArrowRight')
    await expect.poll(() => summary.textContent()).toBe(summaryOf(next.layers[1]!.devices!.execution!))
    await page.getByTestId('replay-execution').scrollIntoViewIfNeeded()
    await page.waitForTimeout(300)
    await screenshot(page, 'replay-execution')
  })

  it('ran without script errors', () => {
    expect(browser.problems).toEqual([])
  })
})
