// What this machine offers the engine: CPU model, cores and the SIMD features the kernels dispatch on,
// memory, the disk holding the data directory, and GPUs (none until the CUDA backend lands).
import { readFileSync, statfsSync } from 'node:fs'
import os from 'node:os'

import type { Hardware } from '../api/contract'

const DISPATCHED_FEATURES = ['avx512f', 'avx512bw', 'avx512_bf16', 'avx512vl', 'avx2', 'fma']

function cpuFlags(): Set<string> {
  try {
    const line = readFileSync('/proc/cpuinfo', 'utf8').split('\n').find((l) => l.startsWith('flags'))
    return new Set(line ? line.split(':')[1]!.trim().split(/\s+/) : [])
  } catch {
    return new Set()
  }
}

export function probeHardware(dataDir: string): Hardware {
  const flags = cpuFlags()
  const disk = statfsSync(dataDir)
  return {
    cpuModel: os.cpus()[0]?.model ?? 'unknown',
    cpus: os.cpus().length,
    cpuFeatures: DISPATCHED_FEATURES.filter((f) => flags.has(f)),
    memoryBytes: os.totalmem(),
    freeMemoryBytes: os.freemem(),
    disks: [{ path: dataDir, totalBytes: disk.blocks * disk.bsize, freeBytes: disk.bavail * disk.bsize }],
    gpus: [],
    backends: ['cpu'],
  }
}
