// train.threads against the machine's logical CPUs (hardware.probe): more threads than CPUs take turns on them, and
// every parallel step of a training waits for the last one scheduled, so such a run is several times slower, not
// faster. Said by the New-run form's pre-flight before the run (the engine's start line says it too).
import type { Hardware } from '../../main/api/contract'

/** The note for `threads` on this machine, or null when they fit (or either is unknown). */
export function threadsOverCpus(hw: Hardware | null, threads: unknown): string | null {
  if (!hw || typeof threads !== 'number' || !Number.isInteger(threads) || threads <= hw.cpus) return null
  return `train.threads ${threads} is more than this machine's ${hw.cpus} logical CPUs: the threads would take turns ` +
    `and every step would wait for the last of them. ${hw.cpus} is the most that helps.`
}
