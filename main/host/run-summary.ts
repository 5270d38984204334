// RunRecord (the store's row) -> RunSummary (the API's list item).
import type { RunSummary } from '../api/contract'
import { describeModel, describeStrategy } from './describe-run'
import type { RunRecord } from './store/store'

export function toRunSummary(r: RunRecord): RunSummary {
  return {
    id: r.id,
    name: r.name,
    status: r.status,
    createdAt: r.createdAt,
    startedAt: r.startedAt,
    finishedAt: r.finishedAt,
    step: r.step,
    totalSteps: r.totalSteps,
    lastLoss: r.lastLoss,
    tokensPerSec: r.tokensPerSec,
    model: describeModel(r.config),
    strategy: describeStrategy(r.config, r.offload),
    error: r.error,
  }
}
