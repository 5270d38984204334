// A run's totals over all its steps, for Compare's summary: the peak booking of each memory tier and the
// bytes its strategy moved (host↔device copies and SSD reads and writes of offload, tokens, weights and
// offloaded state exchanged between placement devices). Aggregated in SQL over every step, never over a
// downsampled series. A tier or a kind of traffic the run never recorded is null, not 0.
import type { RunTotals } from '../../api/contract'
import type { SqlDatabase } from './db'

const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null)

export function runTotals(db: SqlDatabase, runId: string): RunTotals {
  const steps = db
    .prepare(
      `SELECT COUNT(*) AS steps, MAX(peak_device_bytes) AS device, MAX(peak_host_bytes) AS host,
              MAX(peak_ssd_bytes) AS ssd, COUNT(bytes_h2d) AS offloaded,
              SUM(COALESCE(bytes_h2d, 0) + COALESCE(bytes_d2h, 0) + COALESCE(bytes_ssd_read, 0) + COALESCE(bytes_ssd_write, 0)) AS moved
         FROM steps WHERE run_id = ?`,
    )
    .get(runId)
  const placement = db
    .prepare(
      `SELECT COUNT(token_bytes) AS measured,
              SUM(COALESCE(token_bytes, 0) + COALESCE(weight_bytes, 0) + COALESCE(offload_bytes, 0)) AS moved
         FROM layer_placements WHERE run_id = ?`,
    )
    .get(runId)
  const offloadMoved = num(steps?.offloaded) ? num(steps?.moved) : null
  const placementMoved = num(placement?.measured) ? num(placement?.moved) : null
  return {
    steps: num(steps?.steps) ?? 0,
    peakBytes: { device: num(steps?.device), host: num(steps?.host), ssd: num(steps?.ssd) },
    bytesMoved: offloadMoved === null && placementMoved === null ? null : (offloadMoved ?? 0) + (placementMoved ?? 0),
    offloadBytes: offloadMoved,
    placementBytes: placementMoved,
  }
}
