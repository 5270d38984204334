// What this machine offers the engine: CPU model, cores and the SIMD features the kernels dispatch on,
// memory, the disk holding the data directory, GPUs (none listed yet), and the engine's own backends with the
// kernels each picks here (asked of the engine, which alone knows whether, say, Linux lets it use AMX).
import { readFileSync, statfsSync } from 'node:fs'
import os from 'node:os'

import type { Hardware } from '../api/contract'
import { loadEngineAddon } from './engine/addon'

const DISPATCHED_FEATURES = ['amx_bf16', 'amx_tile', 'avx512f', 'avx512bw', 'avx512_bf16', 'avx512vl', 'avx2', 'fma']

interface ListedBackend {
  name: string
  usable: boolean
  why_not: string
  kernels?: string
  bf16_native?: boolean
}

function engineBackends(): Pick<Hardware, 'engineBackends' | 'engineError'> {
  try {
    const listed = JSON.parse(loadEngineAddon().listBackends()) as ListedBackend[]
    return {
      engineBackends: listed.map((b) => ({ name: b.name, usable: b.usable, whyNot: b.why_not, kernels: b.kernels ?? '', bf16Native: b.bf16_native ?? false })),
      engineError: null,
    }
  } catch (e) {
    return { engineBackends: [], engineError: e instanceof Error ? e.message : String(e) }
  }
}

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
  const engine = engineBackends()
  const usable = engine.engineBackends.filter((b) => b.usable).map((b) => b.name)
  return {
    cpuModel: os.cpus()[0]?.model ?? 'unknown',
    cpus: os.cpus().length,
    cpuFeatures: DISPATCHED_FEATURES.filter((f) => flags.has(f)),
    memoryBytes: os.totalmem(),
    freeMemoryBytes: os.freemem(),
    disks: [{ path: dataDir, totalBytes: disk.blocks * disk.bsize, freeBytes: disk.bavail * disk.bsize }],
    gpus: [],
    backends: usable,
    ...engine,
  }
}
