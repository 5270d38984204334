// Checkpoints in Chromium against the real host: a finished run's checkpoints, an export through the
// directory picker into a Hugging Face layout on disk, serving hints from the run's expert loads written to a
// folder, and "fine-tune from".
import { existsSync, readdirSync } from 'node:fs'
import { join } from 'node:path'

import type { Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

import { RunSpecSchema, type RunSummary } from '../../main/api/contract'
import { launchBrowser, openApp, screenshot, startTraining, startWorkbench, tinyRunSpec, waitForStatus, waitForTestId, type Browser, type Workbench } from './harness'

let wb: Workbench
let browser: Browser
let page: Page
let run: RunSummary

beforeAll(async () => {
  wb = await startWorkbench()
  browser = await launchBrowser()
  page = browser.page
  run = await startTraining(wb, tinyRunSpec('checkpointed', { train: { steps: 10, checkpoint_every: 5 } }))
  await waitForStatus(wb, run.id, 'finished')
})

afterAll(async () => {
  await browser?.close()
  await wb?.close()
})

describe('Checkpoints view', () => {
  it('lists the run’s checkpoints, newest first', async () => {
    await openApp(page, wb, `#/checkpoints/${run.id}`)
    const table = await waitForTestId(page, 'checkpoints-table')
    await expect.poll(() => table.locator('tbody tr').count()).toBe(2)
    expect(await table.locator('tbody tr').first().getAttribute('data-step')).toBe('10')
    expect(await page.title()).toBe('Checkpoints checkpointed · MoE Workbench')
  })

  it('exports a checkpoint to a directory chosen with the picker', async () => {
    const target = wb.tempDir('moe-e2e-export-')
    await page.locator('tr[data-step="10"] [data-action="export"]').click()
    await page.getByRole('button', { name: 'Browse…' }).click()
    await waitForTestId(page, 'dir-listing')
    await page.getByLabel('Export to directory').fill(join(target, 'hf'))
    await page.getByLabel('dtype').selectOption('bf16')
    await page.getByRole('button', { name: 'Export', exact: true }).click()
    const state = await waitForTestId(page, 'export-state')
    await expect.poll(() => state.textContent(), { timeout: 60_000 }).toMatch(/Exported to|failed/)
    expect(await state.textContent()).toContain(`Exported to ${join(target, 'hf')}`)
    const files = readdirSync(join(target, 'hf'))
    expect(files).toContain('config.json')
    expect(files.some((f) => f.endsWith('.safetensors'))).toBe(true)
    await screenshot(page, 'checkpoints')
  })

  it('computes serving hints from the expert loads and writes them to a folder', async () => {
    const hints = await waitForTestId(page, 'serving-hints')
    await page.locator('#hints-vram').fill('1 MiB')
    await hints.locator('[data-action="compute-hints"]').click()
    const sglang = await waitForTestId(page, 'hint-sglang')
    // The tiny e2e model: 2 MoE layers of 4 experts; 10 steps of 4×32 tokens, top-2, all within the last 100 steps.
    const counts = JSON.parse((await sglang.locator('pre').textContent())!) as { logical_count: number[][] }
    expect(counts.logical_count.map((row) => row.reduce((a, b) => a + b, 0))).toEqual([10 * 128 * 2, 10 * 128 * 2])
    expect(await page.getByTestId('hint-llama-cpp').locator('pre').textContent()).toMatch(/^-ngl 999 (-ot "blk\\\.\([\d|]+\)\\\.ffn_\(gate\|up\|down\)_exps\\\.=CUDA0" )?-ot "ffn_\(gate\|up\|down\)_exps\\\.=CPU"$/)
    expect(await page.getByTestId('hint-hot-experts').locator('li').count()).toBe(2)
    const target = join(wb.tempDir('moe-e2e-hints-'), 'hints')
    await page.getByLabel('Write the files to directory').fill(target)
    await hints.locator('[data-action="write-hints"]').click()
    await expect.poll(() => page.getByTestId('hints-written').textContent().catch(() => '')).toContain(target)
    expect(readdirSync(target).sort()).toEqual(['README.txt', 'expert-location.json', 'hot-experts.json', 'llama-cpp-args.txt'])
    await screenshot(page, 'serving-hints')
  })

  it('starts a fine-tune from a checkpoint in the New-run view', async () => {
    const path = (await wb.handlers['runs.get']({ id: run.id })).checkpoints.find((c) => c.step === 5)!.path
    expect(existsSync(path)).toBe(true)
    await page.locator('tr[data-step="5"] [data-action="fine-tune"]').click()
    await expect.poll(() => page.url()).toContain('#/new?init=')
    expect(decodeURIComponent(new URL(page.url()).hash.split('init=')[1]!)).toBe(path)
  })

  it('exports a LoRA run’s checkpoint as its PEFT adapter by default, or merged', async () => {
    const spec = tinyRunSpec('lora-export', { train: { steps: 4, checkpoint_every: 4 } })
    const lora = await startTraining(wb, RunSpecSchema.parse({ ...spec, config: { ...spec.config, finetune: { method: 'lora', lora: { rank: 4 } } } }))
    await waitForStatus(wb, lora.id, 'finished')
    await openApp(page, wb, `#/checkpoints/${lora.id}`)
    await waitForTestId(page, 'checkpoints-table')
    await page.locator('tr[data-step="4"] [data-action="export"]').click()
    const format = await waitForTestId(page, 'export-format')
    expect(await format.inputValue()).toBe('adapter')
    const target = wb.tempDir('moe-e2e-adapter-')
    await page.getByLabel('Export to directory').fill(join(target, 'adapter'))
    await page.getByRole('button', { name: 'Export', exact: true }).click()
    const done = await waitForTestId(page, 'export-done', 60_000)
    expect(await done.textContent()).toContain(`Exported to ${join(target, 'adapter')}: the PEFT adapter`)
    expect(readdirSync(join(target, 'adapter')).sort()).toEqual(['adapter_config.json', 'adapter_model.safetensors'])
    // The same checkpoint merged: a whole model.
    await format.selectOption('merged')
    await page.getByLabel('Export to directory').fill(join(target, 'merged'))
    await page.getByRole('button', { name: 'Export', exact: true }).click()
    await expect.poll(() => page.getByTestId('export-done').textContent(), { timeout: 60_000 }).toContain(`Exported to ${join(target, 'merged')}: the merged model`)
    expect(readdirSync(join(target, 'merged'))).toContain('config.json')
  })

  it('ran without script errors or CSP violations', () => {
    expect(browser.problems).toEqual([])
  })
})
