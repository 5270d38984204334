// `moe-workbench chat`: one-shot answers streamed to stdout from a model folder and from a run's checkpoint, the
// same greedy answer with the experts in the host or SSD tier, each token's experts with --experts, a run's base
// model refused by name when it has none, and bad flags as usage errors.
import { join } from 'node:path'

import { afterAll, describe, expect, it } from 'vitest'

import { chat } from '../../main/cli/commands/chat'
import type { CliContext } from '../../main/cli/context'
import { runCli } from '../../main/cli/run-cli'
import { loadEngineAddon } from '../../main/host/engine/addon'
import { createHost } from '../../main/host/host'
import { runRecord, tempDir } from './store-fixtures'

const { dir, cleanup } = tempDir()
afterAll(cleanup)

// A random-weight byte-level model (no tokenizer files: the prompt is its UTF-8 bytes).
const modelDir = join(dir, 'model')
new (loadEngineAddon().Engine)(
  JSON.stringify({
    model: { arch: 'mixtral', vocab_size: 256, d_model: 32, n_layers: 2, n_heads: 4, max_seq_len: 64, d_ff: 64, n_experts: 4, top_k: 2 },
    train: { batch_size: 1, seq_len: 8, threads: 1, seed: 7 },
  }),
).saveCheckpoint(modelDir)

function context() {
  const out: string[] = []
  const err: string[] = []
  const ctx: CliContext = {
    out: { write: (t: string) => out.push(t) },
    err: { write: (t: string) => err.push(t) },
    dataDir: join(dir, 'home'),
    openHost: (options) => createHost({ dataDir: join(dir, 'home'), ...options }),
    onInterrupt: () => () => {},
  }
  return { ctx, out: () => out.join(''), err: () => err.join('') }
}

async function run(argv: string[]) {
  const c = context()
  const code = await runCli(argv, c.ctx)
  return { code, out: c.out(), err: c.err() }
}

describe('moe-workbench chat', () => {
  it('streams a greedy answer from a model folder, the same with experts in the host or SSD tier', async () => {
    const args = ['chat', modelDir, '--prompt', 'def main():', '--max-tokens', '12']
    const resident = await run(args)
    expect(resident.code, resident.err).toBe(0)
    expect(resident.out.endsWith('\n')).toBe(true)
    for (const tier of ['host', 'ssd']) expect((await run([...args, '--offload', tier])).out).toBe(resident.out)
    // A seed replays sampling.
    const sampled = ['chat', modelDir, '--prompt', 'x', '--max-tokens', '12', '--temperature', '1.2', '--top-p', '0.95', '--seed', '5']
    expect((await run(sampled)).out).toBe((await run(sampled)).out)
  }, 60_000)

  it('lists each token’s experts per MoE layer with --experts', async () => {
    const { code, out } = await run(['chat', modelDir, '--prompt', 'hi', '--max-tokens', '4', '--experts'])
    expect(code).toBe(0)
    const rows = out.split('\n').filter((l) => /^\s+\d+\s/.test(l))
    expect(rows).toHaveLength(4)
    for (const row of rows) expect(row).toMatch(/L0: \d,\d {2}L1: \d,\d$/)
  }, 60_000)

  it('answers from a run’s checkpoint, and names a run without a base model', async () => {
    const setup = await createHost({ dataDir: join(dir, 'home'), recoverRuns: false })
    setup.store.insertRun(runRecord('r1', { status: 'stopped', step: 3 }))
    setup.store.addCheckpoint({ runId: 'r1', step: 3, path: modelDir, createdAt: 1, bytes: 1 })
    await setup.close()
    const fromRun = await run(['chat', 'r1', '--prompt', 'def main():', '--max-tokens', '12'])
    expect(fromRun.code, fromRun.err).toBe(0)
    expect(fromRun.out).toBe((await run(['chat', modelDir, '--prompt', 'def main():', '--max-tokens', '12'])).out)
    const base = await run(['chat', 'r1', '--base', '--prompt', 'x'])
    expect(base.code).toBe(1)
    expect(base.err).toMatch(/run "r1" started from random weights/)
    const step = await run(['chat', 'r1', '--step', '9', '--prompt', 'x'])
    expect(step.err).toMatch(/no checkpoint at step 9 \(it has steps 3\)/)
  }, 60_000)

  it('refuses bad flags as usage errors', async () => {
    expect((await run(['chat', modelDir, '--prompt', 'x', '--offload', 'gpu'])).code).toBe(2)
    expect((await run(['chat', modelDir, '--prompt', 'x', '--top-k', '-1'])).code).toBe(2)
    expect((await run(['chat', modelDir, '--step', '1', '--base', '--prompt', 'x'])).code).toBe(2)
    expect((await run(['chat'])).code).toBe(2)
    const c = context()
    await expect(chat([modelDir, '--prompt', 'x', '--top-p', '0'], c.ctx)).rejects.toThrow(/topP/)
  }, 60_000)
})
