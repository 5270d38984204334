// A diverged step's live event: its NaN and infinite metrics travel as null, so the event passes the contract
// (JSON has no NaN) and the Run view shows a gap instead of the event being dropped.
import { describe, expect, it } from 'vitest'

import { checkEvent } from '../../main/api/event-check'
import { liveStepEvent } from '../../main/host/runs/live-step-event'

describe('live step event', () => {
  it('carries non-finite metrics as null and passes the contract', () => {
    const event = liveStepEvent('r1', {
      step: 7, wallTime: 1, loss: Number.NaN, aux_loss: Infinity, lr: 1e-3, grad_norm: Number.NaN, tokens: 64,
      step_ms: 10, forward_ms: 3, backward_ms: 5, optimizer_ms: 2, eval_loss: NaN, expertTokens: [[1, 2]],
    })
    expect(event.metrics).toMatchObject({ step: 7, loss: null, aux_loss: null, grad_norm: null, lr: 1e-3, tokens_per_s: 6400 })
    expect(checkEvent('run.step', event).ok).toBe(true)
  })
})
