// Shared end-to-end harness: a REAL host (run manager, SQLite store, forked engine processes) and the
// browser-mode server in the test process, real short trainings, and Debian's Chromium via playwright-core.
//
// API
//   ensureBuilt()                        builds out/ with `npx electron-vite build` when a source is newer than
//                                        the bundle (skipped with E2E_SKIP_BUILD=1); startWorkbench() calls it.
//   startWorkbench(opts?) -> Workbench   temp data dir (like MOE_WORKBENCH_HOME), createHost with the built
//                                        out/main/engine-worker.js, startServer on out/renderer.
//     .handlers / .host / .dataDir       call the typed API directly (wb.handlers['runs.get']({ id }))
//     .url(hash?)                        the tokened URL, optionally with a route hash ('#/replay/<id>')
//     .events                            every pushed event so far ({ name, payload })
//     .tempDir(prefix)                   a temp dir removed at close (export targets, ...)
//     .close()                           stops runs, closes server and host, removes temp dirs
//   tinyRunSpec(name, { train?, model? }) a RunSpec for a mixtral d_model 64, 2 layers, 4 experts, seq 32,
//                                        batch 4, 30 steps, checkpoint_every 10 on the bundled python tutorial
//   startTraining(wb, spec) -> summary   runs.create
//   waitForStatus(wb, id, statuses, timeoutMs?) -> summary   polls runs.get until the status is one of them
//   waitForStep(wb, id, step, timeoutMs?) -> summary          polls until the run has reached the step
//   launchBrowser() -> Browser           one Chromium per test file (fresh --user-data-dir); .page, .context,
//                                        .problems (page errors and console errors), .newPage(), .close()
//   openApp(page, wb, hash?)             loads the tokened URL (signs in) and then the route hash
//   formInput(page, path)                the New-run form's input of a field ('model.top_k', 'name', 'dataset.path')
//   fillTinyRunForm(page, wb, name, extra?) opens New run and fills the name, the bundled corpus, TINY_FORM's shapes
//                                        (tinyRunSpec's, trained in seconds) and then `extra` ({ 'train.steps': '6' })
//   waitForTestId(page, id, timeoutMs?)  resolves with the locator once [data-testid=id] is visible
//   screenshot(page, name)               test-artifacts/e2e/<name>.png, returns the path
//
//   withWorkbenchAndBrowser(set)         registers the file's beforeAll (a workbench and a Chromium, handed to
//                                        `set`) and afterAll (both closed)
//
// Typical file:
//   let wb: Workbench; let browser: Browser; let page: Page
//   withWorkbenchAndBrowser((s) => ({ wb, browser, page } = s))
import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import { chromium, type BrowserContext, type Locator, type Page } from 'playwright-core'
import { afterAll, beforeAll } from 'vitest'

import type { RunConfig } from '../../main/api/config'
import type { ApiHandlers, EventName, EventPayload, RunSpec, RunStatus, RunSummary } from '../../main/api/contract'
import { RunSpecSchema } from '../../main/api/contract'
import { createHost, type Host } from '../../main/host/host'
import { startServer, type RunningServer } from '../../main/server'

export const repoRoot = new URL('../..', import.meta.url).pathname
export const staticDir = join(repoRoot, 'out', 'renderer')
export const workerEntry = join(repoRoot, 'out', 'main', 'engine-worker.js')
export const artifactsDir = join(repoRoot, 'test-artifacts', 'e2e')
export const corpusPath = join(repoRoot, 'resources', 'corpus', 'python-tutorial.txt')
export const chromiumPath = '/usr/bin/chromium'
export const chromiumArgs = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--no-first-run',
  '--disable-sync',
]

const SOURCE_DIRS = ['main', 'renderer', 'preload']
const BUILT_FILES = [join(staticDir, 'index.html'), workerEntry, join(repoRoot, 'out', 'main', 'index.js')]
const BUILD_LOCK = join(repoRoot, 'node_modules', '.cache', 'moe-e2e-build.lock')

function newestMtime(dir: string): number {
  let newest = 0
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) newest = Math.max(newest, newestMtime(path))
    else if (entry.isFile()) newest = Math.max(newest, statSync(path).mtimeMs)
  }
  return newest
}

function bundleIsStale(): boolean {
  if (BUILT_FILES.some((f) => !existsSync(f))) return true
  const built = Math.min(...BUILT_FILES.map((f) => statSync(f).mtimeMs))
  const sources = Math.max(...SOURCE_DIRS.map((d) => newestMtime(join(repoRoot, d))), statSync(join(repoRoot, 'electron.vite.config.ts')).mtimeMs)
  return sources > built
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

// Several test files (and several engineers) may start at once: one builds, the others wait for it.
async function withBuildLock<T>(work: () => T): Promise<T> {
  mkdirSync(join(BUILD_LOCK, '..'), { recursive: true })
  const deadline = Date.now() + 300_000
  for (;;) {
    try {
      mkdirSync(BUILD_LOCK)
      break
    } catch {
      // A lock older than the longest build belongs to a process that died mid-build.
      if (Date.now() - statSync(BUILD_LOCK, { throwIfNoEntry: false })!.mtimeMs > 300_000) rmSync(BUILD_LOCK, { recursive: true, force: true })
      if (Date.now() > deadline) throw new Error(`waited 5 minutes for the build lock ${BUILD_LOCK}`)
      await sleep(500)
    }
  }
  try {
    return work()
  } finally {
    rmSync(BUILD_LOCK, { recursive: true, force: true })
  }
}

export async function ensureBuilt(): Promise<void> {
  if (!process.env['E2E_SKIP_BUILD'] && bundleIsStale())
    await withBuildLock(() => {
      if (bundleIsStale()) execFileSync('npx', ['electron-vite', 'build'], { cwd: repoRoot, stdio: 'inherit' })
    })
  for (const file of BUILT_FILES)
    if (!existsSync(file)) throw new Error(`no ${file}: run \`npx electron-vite build\` (or unset E2E_SKIP_BUILD)`)
}

export interface PushedEvent {
  name: EventName
  payload: EventPayload<EventName>
}

export interface Workbench {
  host: Host
  server: RunningServer
  handlers: ApiHandlers
  dataDir: string
  events: PushedEvent[]
  url(hash?: string): string
  tempDir(prefix: string): string
  close(): Promise<void>
}

export interface WorkbenchOptions {
  /** Runs trained at once (default 1: later runs queue, as in the app). */
  concurrency?: number
  /** An existing data dir (kept at close); default a fresh temp dir removed at close. */
  dataDir?: string
}

export async function startWorkbench(options: WorkbenchOptions = {}): Promise<Workbench> {
  await ensureBuilt()
  mkdirSync(artifactsDir, { recursive: true })
  const temps: string[] = []
  const tempDir = (prefix: string) => {
    const dir = mkdtempSync(join(tmpdir(), prefix))
    temps.push(dir)
    return dir
  }
  const dataDir = options.dataDir ?? tempDir('moe-e2e-home-')
  const host = await createHost({ dataDir, workerEntry, concurrency: options.concurrency })
  const events: PushedEvent[] = []
  const stopRecording = host.onEvent((name, payload) => void events.push({ name, payload }))
  let server: RunningServer
  try {
    server = await startServer({ handlers: host.handlers, onEvent: host.onEvent, staticDir })
  } catch (e) {
    await host.close()
    throw e
  }
  return {
    host,
    server,
    handlers: host.handlers,
    dataDir,
    events,
    url: (hash = '') => server.url + hash,
    tempDir,
    close: async () => {
      stopRecording()
      try {
        await server.close()
        await host.close()
      } finally {
        for (const dir of temps) rmSync(dir, { recursive: true, force: true })
      }
    },
  }
}

export interface TinySpecOverrides {
  train?: Partial<RunConfig['train']>
  model?: Partial<RunConfig['model']>
}

export function tinyRunSpec(name: string, overrides: TinySpecOverrides = {}): RunSpec {
  return RunSpecSchema.parse({
    name,
    config: {
      model: {
        arch: 'mixtral', vocab_size: 256, d_model: 64, n_layers: 2, n_heads: 4, max_seq_len: 32, d_ff: 128, n_experts: 4, top_k: 2,
        ...overrides.model,
      },
      train: {
        batch_size: 4, seq_len: 32, steps: 30, lr: 1e-3, warmup_steps: 2, threads: 1, checkpoint_every: 10,
        ...overrides.train,
      },
    },
    dataset: { path: corpusPath },
  })
}

export function startTraining(wb: Workbench, spec: RunSpec): Promise<RunSummary> {
  return wb.handlers['runs.create']({ spec })
}

async function pollRun(wb: Workbench, id: string, done: (s: RunSummary) => boolean, what: string, timeoutMs: number): Promise<RunSummary> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const { summary } = await wb.handlers['runs.get']({ id })
    if (done(summary)) return summary
    if (Date.now() > deadline)
      throw new Error(`run ${id} did not reach ${what} in ${timeoutMs} ms (status ${summary.status}, step ${summary.step}${summary.error ? `, error: ${summary.error}` : ''})`)
    await sleep(100)
  }
}

export function waitForStatus(wb: Workbench, id: string, statuses: RunStatus | RunStatus[], timeoutMs = 120_000): Promise<RunSummary> {
  const wanted = Array.isArray(statuses) ? statuses : [statuses]
  return pollRun(wb, id, (s) => wanted.includes(s.status), `status ${wanted.join('/')}`, timeoutMs)
}

export function waitForStep(wb: Workbench, id: string, step: number, timeoutMs = 120_000): Promise<RunSummary> {
  return pollRun(wb, id, (s) => s.step >= step, `step ${step}`, timeoutMs)
}

export interface Browser {
  context: BrowserContext
  page: Page
  /** Page errors and console errors of every page opened through this browser. */
  problems: string[]
  newPage(): Promise<Page>
  close(): Promise<void>
}

function watchProblems(page: Page, problems: string[]): Page {
  page.on('pageerror', (error) => problems.push(`pageerror: ${error.message}`))
  page.on('console', (message) => {
    if (message.type() === 'error') problems.push(`console: ${message.text()} (${message.location().url})`)
  })
  return page
}

export async function launchBrowser(viewport = { width: 1280, height: 800 }): Promise<Browser> {
  const userDataDir = mkdtempSync(join(tmpdir(), 'moe-e2e-chromium-'))
  const problems: string[] = []
  let context: BrowserContext
  try {
    context = await chromium.launchPersistentContext(userDataDir, { executablePath: chromiumPath, headless: true, viewport, args: chromiumArgs })
  } catch (e) {
    rmSync(userDataDir, { recursive: true, force: true })
    throw e
  }
  const page = watchProblems(context.pages()[0] ?? (await context.newPage()), problems)
  return {
    context,
    page,
    problems,
    newPage: async () => watchProblems(await context.newPage(), problems),
    close: async () => {
      try {
        await context.close()
      } finally {
        rmSync(userDataDir, { recursive: true, force: true })
      }
    },
  }
}

/** Signs in with the tokened URL (the app drops the token from the address bar), then goes to `hash`. */
/** One workbench and one Chromium for the whole test file: started before its tests, closed after them. */
export function withWorkbenchAndBrowser(set: (started: { wb: Workbench; browser: Browser; page: Page }) => void): void {
  let wb: Workbench | undefined
  let browser: Browser | undefined
  beforeAll(async () => {
    wb = await startWorkbench()
    browser = await launchBrowser()
    set({ wb, browser, page: browser.page })
  })
  afterAll(async () => {
    await browser?.close()
    await wb?.close()
  })
}

export async function openApp(page: Page, wb: Workbench, hash = ''): Promise<void> {
  await page.goto(wb.url())
  await page.locator('h1').waitFor()
  // The test project has no DOM types; the page's location is reached through globalThis.
  if (hash) await page.evaluate((h) => void ((globalThis as unknown as { location: { hash: string } }).location.hash = h), hash)
}

/** The New-run form's input of a field (ids from renderer/views/new-run/field-ids.ts). */
export const formInput = (page: Page, path: string): Locator => page.locator(`#field-${path.replace(/[^a-zA-Z0-9_-]/g, '-')}`)

/** tinyRunSpec's shapes as the New-run form's inputs, so a run from the form trains in seconds on two slow cores. */
export const TINY_FORM: Readonly<Record<string, string>> = {
  'model.d_model': '64',
  'model.n_layers': '2',
  'model.n_heads': '4',
  'model.n_kv_heads': '4',
  'model.max_seq_len': '32',
  'model.d_ff': '128',
  'model.expert_d_ff': '128',
  'model.n_experts': '4',
  'train.batch_size': '4',
  'train.seq_len': '32',
  'train.warmup_steps': '1',
  'train.threads': '1',
}

export async function fillTinyRunForm(page: Page, wb: Workbench, name: string, extra: Record<string, string> = {}): Promise<void> {
  await openApp(page, wb, '#/new')
  await waitForTestId(page, 'preflight')
  await formInput(page, 'name').fill(name)
  await formInput(page, 'dataset.path').fill(corpusPath)
  for (const [path, value] of Object.entries({ ...TINY_FORM, ...extra })) await formInput(page, path).fill(value)
}

export async function waitForTestId(page: Page, testId: string, timeoutMs = 30_000): Promise<Locator> {
  const locator = page.getByTestId(testId).first()
  await locator.waitFor({ state: 'visible', timeout: timeoutMs })
  return locator
}

export async function screenshot(page: Page, name: string): Promise<string> {
  mkdirSync(artifactsDir, { recursive: true })
  const path = join(artifactsDir, `${name}.png`)
  await page.screenshot({ path, fullPage: true })
  return path
}
