// How one MoE layer's expert phase ran on the devices at the replayed step (step record v5): the pipeline's
// partitions n and memory-reuse strategy, equation 10's predicted time against the measured critical time
// (the slowest device's pipelined time), the wall time, the bytes moved (token rows, weights and gradients,
// offloaded activations), each device's busy time, and each device's peak bytes at the step.
import type { StepLoads } from '../../main/api/contract'
import { formatBytes } from '../format'
import type { LayerStep } from './devices'

export const REUSE_NAMES = ['none', 'S1', 'S2', 'S3', 'S4'] as const

/** What each memory-reuse strategy does (MPipeMoE Table II), for titles. */
export const REUSE_MEANINGS: Record<(typeof REUSE_NAMES)[number], string> = {
  none: 'every partition keeps its own buffers',
  S1: 'offload the dispatched input, offload the hidden activation',
  S2: 'offload the dispatched input, recompute the hidden activation',
  S3: 're-send the dispatched input, offload the hidden activation',
  S4: 're-send the dispatched input, recompute the hidden activation',
}

export interface LayerExecutionView {
  devices: number
  partitions: number
  /** "none", "S1" … "S4" ("S7?" for a code this build does not know). */
  reuse: string
  criticalMs: number
  wallMs: number
  /** null without memory reuse (the engine predicts only for a strategy). */
  predictedMs: number | null
  /** predicted / critical; null without a prediction or a measured time. */
  predictedOverMeasured: number | null
  tokenBytes: number
  weightBytes: number
  offloadBytes: number
  busyMs: number[]
}

/** The layer's execution at the step, or null when the record does not say (older runs, or not measured). */
export function layerExecution(layer: Pick<LayerStep, 'devices'> | null): LayerExecutionView | null {
  const x = layer?.devices?.execution
  if (!x) return null
  const predicted = x.reuseStrategy > 0 ? x.predictedMs : null
  return {
    devices: x.deviceBusyMs.length,
    partitions: x.partitions,
    reuse: REUSE_NAMES[x.reuseStrategy] ?? `S${x.reuseStrategy}?`,
    criticalMs: x.criticalMs,
    wallMs: x.wallMs,
    predictedMs: predicted,
    predictedOverMeasured: predicted !== null && x.criticalMs > 0 ? predicted / x.criticalMs : null,
    tokenBytes: x.tokenBytes,
    weightBytes: x.weightBytes,
    offloadBytes: x.offloadBytes,
    busyMs: x.deviceBusyMs,
  }
}

const ms = (v: number) => `${v.toFixed(v < 10 ? 2 : 1)} ms`

/** "n = 4 · memory reuse S2 · critical 12.30 ms, predicted 13.10 ms (×1.07) · wall 30.1 ms" */
export function executionSummary(x: LayerExecutionView): string {
  const prediction = x.predictedMs === null
    ? 'no prediction without memory reuse'
    : `predicted ${ms(x.predictedMs)}${x.predictedOverMeasured !== null ? ` (×${x.predictedOverMeasured.toFixed(2)})` : ''}`
  return `n = ${x.partitions} · memory reuse ${x.reuse} · critical ${ms(x.criticalMs)}, ${prediction} · wall ${ms(x.wallMs)}`
}

/** "moved: tokens 1.50 MiB · weights 3.00 MiB · offloaded 0 B" */
export function bytesSummary(x: Pick<LayerExecutionView, 'tokenBytes' | 'weightBytes' | 'offloadBytes'>): string {
  return `moved: tokens ${formatBytes(x.tokenBytes)} · weights ${formatBytes(x.weightBytes)} · offloaded ${formatBytes(x.offloadBytes)}`
}

export interface DevicePeaks {
  peaks: number[]
  /** placement.device_budget_bytes; null: unlimited. */
  budget: number | null
}

/** The devices' peak bytes at the step, or null when not recorded. */
export function devicePeaks(step: Pick<StepLoads, 'devicePeakBytes'> | null, budget: number | null): DevicePeaks | null {
  return step?.devicePeakBytes ? { peaks: step.devicePeakBytes, budget } : null
}

/** "peak 4.00 GiB (dev 2) of a 8.00 GiB budget" / "peak 4.00 GiB (dev 2), no budget" */
export function peaksSummary(p: DevicePeaks): string {
  if (p.peaks.length === 0) return 'no devices'
  const top = p.peaks.reduce((best, v, d) => (v > p.peaks[best]! ? d : best), 0)
  const peak = `peak ${formatBytes(p.peaks[top]!)} (dev ${top})`
  return p.budget !== null ? `${peak} of a ${formatBytes(p.budget)} budget per device` : `${peak}, no budget`
}
