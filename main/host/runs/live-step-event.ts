// A live step from the engine process as the API's 'run.step' event.
import type { EventPayload } from '../../api/contract'
import type { LiveStep } from '../engine/worker-protocol'

export function liveStepEvent(id: string, s: LiveStep): EventPayload<'run.step'> {
  return {
    id,
    metrics: {
      step: s.step,
      wallTime: s.wallTime,
      loss: s.loss,
      aux_loss: s.aux_loss,
      lr: s.lr,
      grad_norm: s.grad_norm,
      tokens: s.tokens,
      tokens_per_s: s.step_ms > 0 ? s.tokens / (s.step_ms / 1000) : 0,
      step_ms: s.step_ms,
      forward_ms: s.forward_ms,
      backward_ms: s.backward_ms,
      optimizer_ms: s.optimizer_ms,
    },
    expertTokens: s.expertTokens,
  }
}
