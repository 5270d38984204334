// The CLI's views of a run whose metrics diverged (NaN stored as NULL) or were never recorded: each renders,
// with '-' where a value is missing, instead of crashing.
import { describe, expect, it } from 'vitest'

import { runs } from '../../main/cli/commands/runs'
import { show } from '../../main/cli/commands/show'
import type { CliContext } from '../../main/cli/context'
import { createHost } from '../../main/host/host'
import { runRecord, stepRecord, tempDir, wallTimeOf } from './store-fixtures'

async function contextWithRuns(): Promise<{ ctx: CliContext; output: () => string; cleanup: () => void }> {
  const { dir, cleanup } = tempDir()
  const setup = await createHost({ dataDir: dir, recoverRuns: false })
  setup.store.insertRun(runRecord('diverged', { status: 'failed', step: 2, totalSteps: 10, startedAt: 1, error: 'loss is NaN' }))
  const steps = [stepRecord(1), stepRecord(2, { loss: NaN, grad_norm: NaN, aux_loss: Infinity })]
  setup.store.appendSteps('diverged', steps, steps.map((s) => wallTimeOf(s.step)))
  setup.store.insertRun(runRecord('empty', { status: 'queued' }))
  await setup.close()
  const written: string[] = []
  const ctx: CliContext = {
    out: { write: (t: string) => written.push(t) },
    err: { write: (t: string) => written.push(t) },
    dataDir: dir,
    openHost: (options) => createHost({ dataDir: dir, ...options }),
    onInterrupt: () => () => {},
  }
  return { ctx, output: () => written.join(''), cleanup }
}

describe('CLI views of runs with missing or non-finite metrics', () => {
  it('show prints a diverged run, its non-finite last step as -', async () => {
    const { ctx, output, cleanup } = await contextWithRuns()
    try {
      expect(await show(['diverged'], ctx)).toBe(0)
      expect(output()).toMatch(/Last step \(2\): loss -, aux_loss -, lr \d\.\d\de-\d+, grad_norm -/)
    } finally {
      cleanup()
    }
  })

  it('show prints a run that has no step yet', async () => {
    const { ctx, output, cleanup } = await contextWithRuns()
    try {
      expect(await show(['empty'], ctx)).toBe(0)
      expect(output()).toContain('progress  step 0/100, loss -, - tok/s')
      expect(output()).not.toContain('Last step')
    } finally {
      cleanup()
    }
  })

  it('runs lists both', async () => {
    const { ctx, output, cleanup } = await contextWithRuns()
    try {
      expect(await runs([], ctx)).toBe(0)
      expect(output()).toMatch(/diverged .* failed\s+2\/10\s+/)
      expect(output()).toMatch(/empty .* queued\s+0\/100\s+-\s+-/)
    } finally {
      cleanup()
    }
  })
})
