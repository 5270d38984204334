import { describe, expect, it } from 'vitest'

import type { StepMetrics } from '../../main/api/contract'
import { Progress } from '../../main/cli/progress'

const metrics = (step: number): StepMetrics => ({
  step, wallTime: 0, loss: 3 - step / 10, aux_loss: 0, lr: 1e-3, grad_norm: 1, tokens: 512, tokens_per_s: 1234.4,
  step_ms: 400, forward_ms: 0, backward_ms: 0, optimizer_ms: 0, eval_loss: null,
})

function capture(isTTY: boolean) {
  const writes: string[] = []
  return { writes, out: { isTTY, columns: 200, write: (t: string) => writes.push(t) } }
}

describe('training progress', () => {
  it('redraws one bar on a terminal, with an ETA from recent step times', () => {
    const { writes, out } = capture(true)
    let now = 0
    const progress = new Progress(out, 10, () => now)
    for (let step = 1; step <= 5; step++, now += 2000) progress.step(metrics(step))
    progress.finish()
    expect(writes).toHaveLength(6)
    expect(writes[0]).toBe('\r\x1b[2K[' + '#'.repeat(2) + '.'.repeat(22) + '] step 1/10 | loss 2.9000 | 1,234 tok/s | ETA ?')
    // 2 s per step, 5 steps left.
    expect(writes[4]).toBe('\r\x1b[2K[' + '#'.repeat(12) + '.'.repeat(12) + '] step 5/10 | loss 2.5000 | 1,234 tok/s | ETA 10s')
    expect(writes[5]).toBe('\n')
  })

  it('prints plain lines at most once a second elsewhere, always the first and last step', () => {
    const { writes, out } = capture(false)
    let now = 0
    const progress = new Progress(out, 6, () => now)
    for (let step = 1; step <= 6; step++, now += 400) progress.step(metrics(step))
    progress.finish()
    expect(writes).toEqual([
      'step 1/6 | loss 2.9000 | 1,234 tok/s | ETA ?\n',
      'step 4/6 | loss 2.6000 | 1,234 tok/s | ETA 1s\n',
      'step 6/6 | loss 2.4000 | 1,234 tok/s | ETA 0s\n',
    ])
  })

  it('rates by the steps the events span, not by the number of events (live events are throttled)', () => {
    const { writes, out } = capture(true)
    let now = 0
    const progress = new Progress(out, 1000, () => now)
    // One event every 100 steps, 1 s apart: 10 ms a step, 800 steps left after step 200.
    progress.step(metrics(100))
    now += 1000
    progress.step(metrics(200))
    expect(writes[1]).toMatch(/ETA 8s$/)
  })
})
