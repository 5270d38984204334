// Replay benchmark, run by test/bench/replay (bundled to one .mjs first, since plain Node cannot load
// TypeScript): a synthetic 10k-step × 24-layer × 64-expert run in a temp data dir, the real host and
// browser-mode server, and the Replay view in Chromium. Reads the view's own performance marks:
//   replay:first-paint   navigation start -> the heatmap's first frame is drawn
//   replay:scrub         key press -> the frame showing that step (marker, bars, expert states)
// Prints a table, last line `BENCH replay first_paint_ms=N scrub_ms_p95=N`. Measures, never asserts.
// Usage: node replay-bench.mjs REPO_ROOT DATA_DIR
import { join } from 'node:path'

import { chromium, type Page } from 'playwright-core'

import { createHost } from '../../main/host/host'
import { startServer } from '../../main/server'
import { BENCH_SHAPE, writeSyntheticRun } from './replay-dataset'

const RUN = 'synthetic-replay'
const SCRUB_STEPS = 200
const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run', '--disable-sync']

const quantile = (xs: number[], q: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.max(0, Math.ceil(q * xs.length) - 1))]!
const ms = (x: number) => x.toFixed(1).padStart(8)

async function firstPaint(page: Page, url: string): Promise<number> {
  await page.goto(url)
  await page.waitForFunction(() => performance.getEntriesByName('replay:first-paint').length > 0, undefined, { timeout: 60_000 })
  return page.evaluate(() => performance.getEntriesByName('replay:first-paint')[0]!.startTime)
}

async function scrubTimes(page: Page, key: string, presses: number): Promise<number[]> {
  const before = await page.evaluate(() => performance.getEntriesByName('replay:scrub').length)
  for (let i = 1; i <= presses; i++) {
    await page.keyboard.press(key)
    await page.waitForFunction((n) => performance.getEntriesByName('replay:scrub').length >= n, before + i, { timeout: 10_000 })
  }
  return page.evaluate((skip) => performance.getEntriesByName('replay:scrub').slice(skip).map((e) => e.duration), before)
}

async function main(): Promise<void> {
  const [root, dataDir] = process.argv.slice(2)
  if (!root || !dataDir) throw new Error('usage: replay-bench.mjs REPO_ROOT DATA_DIR')
  const host = await createHost({ dataDir, workerEntry: join(root, 'out', 'main', 'engine-worker.js'), recoverRuns: false })
  const t0 = performance.now()
  writeSyntheticRun(host.store, dataDir, RUN)
  const writeMs = performance.now() - t0
  const server = await startServer({ handlers: host.handlers, onEvent: host.onEvent, staticDir: join(root, 'out', 'renderer') })
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: CHROMIUM_ARGS })
  let failureShot = async () => {}
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } })
    const problems: string[] = []
    page.on('pageerror', (e) => problems.push(e.message))
    page.on('console', (m) => void (m.type() === 'error' && problems.push(m.text())))
    failureShot = async () => {
      await page.screenshot({ path: join(root, 'test-artifacts', 'replay-bench-failure.png') })
      console.error(`page errors: ${problems.join(' | ') || 'none'}; screenshot in test-artifacts/replay-bench-failure.png`)
    }
    const origin = new URL(server.url).origin
    const replayHash = `#/replay/${RUN}?layer=5&step=5000`
    // The first load signs in (the token URL) and fills the HTTP cache; the second is a plain open.
    const coldMs = await firstPaint(page, `${server.url}${replayHash}`)
    await page.goto('about:blank')
    const warmMs = await firstPaint(page, `${origin}/${replayHash}`)
    await page.getByTestId('replay-heatmap-marker').waitFor()
    const t1 = performance.now()
    const spikeText = page.getByTestId('replay-imbalance')
    await spikeText.waitFor()
    await page.waitForFunction(() => performance.getEntriesByName('replay:ratios').length > 0, undefined, { timeout: 60_000 }).catch(() => undefined)
    const ratiosMs = performance.now() - t1
    await page.locator('h2').click()
    const forward = await scrubTimes(page, 'ArrowRight', SCRUB_STEPS)
    const jumps = await scrubTimes(page, 'Shift+ArrowLeft', 20)
    const all = [...forward, ...jumps]
    const p95 = quantile(all, 0.95)

    console.log(`dataset: ${BENCH_SHAPE.steps} steps × ${BENCH_SHAPE.layers} layers × ${BENCH_SHAPE.experts} experts × ${BENCH_SHAPE.devices} devices, written in ${(writeMs / 1000).toFixed(1)} s`)
    console.log('')
    console.log('measure                              ms')
    console.log(`first paint, sign-in load       ${ms(coldMs)}`)
    console.log(`first paint, plain open         ${ms(warmMs)}`)
    console.log(`full-resolution ratios after    ${ms(ratiosMs)}   (background, after first paint)`)
    console.log(`scrub →, p50 (${forward.length})            ${ms(quantile(forward, 0.5))}`)
    console.log(`scrub →, p95                    ${ms(quantile(forward, 0.95))}`)
    console.log(`scrub Shift+←, p95 (${jumps.length})        ${ms(quantile(jumps, 0.95))}`)
    console.log(`scrub all, p95 / max            ${ms(p95)} / ${Math.max(...all).toFixed(1)}`)
    if (problems.length) console.log(`page errors: ${problems.join(' | ')}`)
    console.log(`BENCH replay first_paint_ms=${Math.round(warmMs)} scrub_ms_p95=${Math.round(p95)}`)
  } catch (e) {
    await failureShot()
    throw e
  } finally {
    await browser.close()
    await server.close()
    await host.close()
  }
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? (e.stack ?? e.message) : e)
  process.exit(1)
})
