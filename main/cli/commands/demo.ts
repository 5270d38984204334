// `moe-workbench demo`: serves the UI and trains the demo's ablation set on the bundled corpus (resident,
// host offload with pinning, SSD offload with its cache, static and least-loaded placement under a routing
// skew), printing the URL of Compare with the set selected as soon as the runs exist, so the comparison
// fills in live; then keeps serving until Ctrl-C. Finished runs of the set with the same config are reused on
// a later start (--fresh trains anew); --quick trains the tiny preset alone, as a fast look.
import type { RunConfig } from '../../api/config'
import type { RunSummary } from '../../api/contract'
import { bundledCorpus } from '../../host/catalog'
import { demoRunName, demoSetConfigs } from '../../host/catalog/demo-set'
import { dataLayout } from '../../host/data-dir'
import { prepareDataset } from '../../host/datasets'
import type { Host } from '../../host/host'
import { integerOption, parseCommandArgs } from '../args'
import { serveUi, untilInterrupted } from '../browser-ui'
import type { CliContext } from '../context'
import { RunFollower } from '../follow-run'
import { formatDuration } from '../format'
import { loadRunConfig } from '../run-config'
import { portOption } from './serve'
import { followNewRun, reportEnd } from './train'

// Steps per run of the set: the whole set takes about five minutes on 2 cores.
export const DEMO_STEPS = 60

/** JSON with sorted keys: two configs are the same run iff these are equal. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`
  if (value !== null && typeof value === 'object')
    return `{${Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`).join(',')}}`
  return JSON.stringify(value)
}

function finishedTwin(host: Host, name: string, config: RunConfig, dataset: string): string | null {
  const want = canonical(config)
  const twin = host.store
    .listRuns()
    .find((r) => r.name === name && r.status === 'finished' && r.dataset.path === dataset && canonical(r.config) === want)
  return twin?.id ?? null
}

async function trainSet(ctx: CliContext, host: Host, base: RunConfig, fresh: boolean, url: string): Promise<number> {
  const dataset = bundledCorpus()
  ctx.out.write(`preparing ${dataset}\n`)
  await prepareDataset({ path: dataset }, dataLayout(host.dataDir).cacheDir)
  const set = demoSetConfigs(base)
  const ids: string[] = []
  const toFollow: { index: number; run: RunSummary; follower: RunFollower }[] = []
  for (const [index, { run, config }] of set.entries()) {
    const name = demoRunName(run)
    const twin = fresh ? null : finishedTwin(host, name, config, dataset)
    if (twin) {
      ids.push(twin)
      ctx.out.write(`[${index + 1}/${set.length}] ${name}: reusing finished run ${twin} (--fresh trains it anew)\n`)
      continue
    }
    // Subscribed before the run exists: a queued run that starts while an earlier one is followed loses nothing.
    const follower = new RunFollower(host, ctx)
    const created = await host.handlers['runs.create']({ spec: { name, config, dataset: { path: dataset } } })
    ids.push(created.id)
    toFollow.push({ index, run: created, follower })
    ctx.out.write(`[${index + 1}/${set.length}] ${name}: run ${created.id} queued — ${run.what}\n`)
  }
  ctx.out.write(`Compare the set at ${url}#/compare?ids=${ids.join(',')}\n`)

  const started = Date.now()
  const totalSteps = toFollow.reduce((n, f) => n + f.run.totalSteps, 0)
  let doneSteps = 0
  let code = 0
  for (const [k, { index, run, follower }] of toFollow.entries()) {
    if (code !== 0) {
      host.runs.stop(run.id) // a queued run leaves the queue
      continue
    }
    ctx.out.write(`[${index + 1}/${set.length}] ${demoRunName(set[index]!.run)} (${run.id})\n`)
    const end = await follower.follow(run, `[${index + 1}/${set.length}] `)
    code = reportEnd(ctx, host, end)
    doneSteps += run.totalSteps
    const left = toFollow.length - k - 1
    const elapsed = Date.now() - started
    ctx.out.write(
      `set: ${k + 1}/${toFollow.length} trained, ${doneSteps}/${totalSteps} steps, ${formatDuration(elapsed)} elapsed` +
        (left > 0 && code === 0 ? `, about ${formatDuration((elapsed / doneSteps) * (totalSteps - doneSteps))} left\n` : '\n'),
    )
  }
  if (code === 0) ctx.out.write(`The set is done: compare it at ${url}#/compare?ids=${ids.join(',')}\n`)
  return code
}

export async function demo(argv: string[], ctx: CliContext): Promise<number> {
  const { values } = parseCommandArgs('demo', argv, {
    steps: { type: 'string' },
    port: { type: 'string' },
    quick: { type: 'boolean' },
    fresh: { type: 'boolean' },
  })
  const port = portOption('demo', values.port)
  const steps = integerOption('demo', 'steps', values.steps, 1)
  const host = await ctx.openHost()
  try {
    const server = await serveUi(host, ctx, port)
    try {
      const code = values.quick
        ? await followNewRun(ctx, host, { name: 'demo', config: loadRunConfig('tiny', steps).config, dataset: { path: bundledCorpus() } })
        : await trainSet(ctx, host, loadRunConfig('tiny', steps ?? DEMO_STEPS).config, values.fresh === true, server.url)
      if (code !== 0) return code
      ctx.out.write(`The workbench stays open at ${server.url}\nCtrl-C to quit.\n`)
      await untilInterrupted(ctx)
      return 0
    } finally {
      await server.close()
    }
  } finally {
    await host.close()
  }
}
