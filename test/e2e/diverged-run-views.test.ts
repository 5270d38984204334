// A run whose every step diverged (its starting checkpoint holds a NaN in one expert, train.on_nonfinite
// "skip"): each view renders it beside a healthy run — the Runs table, the Run page with its charts and the
// engine's account, Compare with both runs, and Replay — with '—' where a value is missing and no page error.
import { readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

import type { Page } from 'playwright-core'
import { describe, expect, it } from 'vitest'

import { loadEngineAddon } from '../../main/host/engine/addon'
import { engineConfigJson } from '../../main/host/runs/engine-config'
import {
  openApp, screenshot, startTraining, tinyRunSpec, waitForStatus, waitForTestId, withWorkbenchAndBrowser, type Browser, type Workbench,
} from './harness'

let wb: Workbench
let browser: Browser
let page: Page

withWorkbenchAndBrowser((started) => ({ wb, browser, page } = started))

const BAD = 'layers.1.moe.experts.2.gate_up.weight'

function poisonedCheckpoint(dir: string, configJson: string): string {
  new (loadEngineAddon().Engine)(configJson).saveCheckpoint(dir)
  const file = join(dir, 'model.safetensors')
  const bytes = readFileSync(file)
  const headerLength = Number(bytes.readBigUInt64LE(0))
  const header = JSON.parse(bytes.subarray(8, 8 + headerLength).toString('utf8')) as Record<string, { data_offsets: [number, number] }>
  bytes.writeFloatLE(Number.NaN, 8 + headerLength + header[BAD]!.data_offsets[0])
  writeFileSync(file, bytes)
  rmSync(join(dir, 'checksums.json'))
  return dir
}

describe('views of a diverged run', () => {
  it('render it with its missing values shown as such, and no page error', async () => {
    const spec = tinyRunSpec('diverged', { train: { steps: 4, checkpoint_every: 0, on_nonfinite: 'skip' } })
    const init = poisonedCheckpoint(join(wb.tempDir('moe-e2e-poisoned-'), 'ckpt'), engineConfigJson(spec.config, null))
    const bad = await startTraining(wb, { ...spec, init })
    const good = await startTraining(wb, tinyRunSpec('healthy', { train: { steps: 4, checkpoint_every: 0 } }))
    const failed = await waitForStatus(wb, bad.id, 'failed')
    expect(failed.error).toContain(`not saved: parameter '${BAD}' holds a NaN`)
    expect(failed.lastLoss).toBeNull()
    await waitForStatus(wb, good.id, 'finished')
    const { events } = await wb.handlers['runs.get']({ id: bad.id })
    expect(events.filter((e) => e.message.startsWith('diverged at step ')).length).toBe(4)

    await openApp(page, wb, '#/runs')
    const row = page.locator(`tr[data-run-id="${bad.id}"]`)
    await expect.poll(() => row.textContent(), { timeout: 15_000 }).toContain('failed')
    expect(await row.textContent()).toContain('—')

    await openApp(page, wb, `#/run/${bad.id}`)
    await page.locator('#run-title').waitFor()
    await waitForTestId(page, 'run-charts')
    await expect.poll(() => page.locator('body').textContent(), { timeout: 15_000 }).toContain('diverged at step 4: the loss is NaN')
    await screenshot(page, 'run-diverged')

    await openApp(page, wb, `#/compare?ids=${bad.id},${good.id}`)
    const summary = await waitForTestId(page, 'compare-summary')
    await expect.poll(() => summary.textContent(), { timeout: 15_000 }).toContain('diverged')
    expect(await summary.textContent()).toContain('—')
    await screenshot(page, 'compare-diverged')

    await openApp(page, wb, `#/replay/${bad.id}`)
    await waitForTestId(page, 'replay-heatmap')
    await screenshot(page, 'replay-diverged')

    expect(browser.problems).toEqual([])
  }, 240_000)
})
