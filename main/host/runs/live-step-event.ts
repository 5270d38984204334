// A live step from the engine process as the API's 'run.step' event.
import { LIVE_METRICS, type EventPayload } from '../../api/contract'
import type { LiveStep } from '../engine/worker-protocol'

type Metrics = EventPayload<'run.step'>['metrics']

export function liveStepEvent(id: string, s: LiveStep): EventPayload<'run.step'> {
  const tokensPerS = s.step_ms > 0 ? s.tokens / (s.step_ms / 1000) : 0
  const finite = (v: number) => (Number.isFinite(v) ? v : null)
  const values = Object.fromEntries(LIVE_METRICS.map((m) => [m, finite(m === 'tokens_per_s' ? tokensPerS : s[m])]))
  return {
    id,
    metrics: { step: s.step, wallTime: s.wallTime, ...values } as Metrics,
    expertTokens: s.expertTokens,
  }
}
