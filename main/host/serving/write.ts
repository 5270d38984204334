// Writes serving hints as files a person hands to the serving engine: SGLang's expert-location JSON, the
// llama.cpp arguments, the hot-expert list and a README with how to use each. Like every export, it never
// replaces an existing directory and leaves nothing behind when it fails.
import { mkdir, rename, rm, writeFile } from 'node:fs/promises'
import { basename, dirname, join, resolve } from 'node:path'

import type { ServingHints } from '../../api/contract'
import { requireFreshTarget } from '../export-checkpoint'

export const SERVING_FILES = {
  sglang: 'expert-location.json',
  llamaCpp: 'llama-cpp-args.txt',
  hotExperts: 'hot-experts.json',
  readme: 'README.txt',
} as const

export async function writeServingHints(
  dir: string,
  runId: string,
  hints: ServingHints,
): Promise<{ dir: string; files: string[]; hints: ServingHints }> {
  const out = resolve(dir)
  await requireFreshTarget(out)
  const tmp = join(dirname(out), `.${basename(out)}.tmp-${process.pid}-${Date.now()}`)
  const { fromStep, toStep } = hints.range
  const readme = [
    `Serving hints from run ${runId}, expert loads of steps ${fromStep}-${toStep}.`,
    '',
    `${SERVING_FILES.sglang} (SGLang): ${hints.usage.sglang}`,
    '',
    `${SERVING_FILES.llamaCpp} (llama.cpp): ${hints.usage.llamaCpp}`,
    '',
    `${SERVING_FILES.hotExperts}: ${hints.usage.hotExperts}`,
    '',
  ].join('\n')
  try {
    await mkdir(tmp, { recursive: true })
    await writeFile(join(tmp, SERVING_FILES.sglang), `${JSON.stringify(hints.sglang)}\n`)
    await writeFile(join(tmp, SERVING_FILES.llamaCpp), `${hints.llamaCpp.args}\n`)
    await writeFile(join(tmp, SERVING_FILES.hotExperts), `${JSON.stringify({ range: hints.range, ...hints.hotExperts }, null, 2)}\n`)
    await writeFile(join(tmp, SERVING_FILES.readme), readme)
    await rm(out, { recursive: true, force: true }) // an empty directory requireFreshTarget allowed
    await rename(tmp, out)
  } catch (e) {
    await rm(tmp, { recursive: true, force: true })
    throw e
  }
  return { dir: out, files: Object.values(SERVING_FILES), hints }
}
