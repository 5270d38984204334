// Hardware probe and directory listing behind the Hardware view and the browser-mode file pickers.
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import { join } from 'node:path'

import { describe, expect, it } from 'vitest'

import { HardwareSchema } from '../../main/api/contract'
import { listDirectory } from '../../main/host/files'
import { probeHardware } from '../../main/host/hardware'

describe('hardware probe', () => {
  it('reports this machine and the disk of the data directory', () => {
    const hw = HardwareSchema.parse(probeHardware(os.tmpdir()))
    expect(hw.cpus).toBe(os.cpus().length)
    expect(hw.memoryBytes).toBe(os.totalmem())
    expect(hw.disks[0]!.path).toBe(os.tmpdir())
    expect(hw.disks[0]!.freeBytes).toBeGreaterThan(0)
    expect(hw.disks[0]!.freeBytes).toBeLessThanOrEqual(hw.disks[0]!.totalBytes)
    // The engine's own answer: its backends, the cpu one usable with the kernels it picks on this CPU.
    expect(hw.engineError).toBeNull()
    expect(hw.backends).toContain('cpu')
    expect(hw.backends).toEqual(hw.engineBackends.filter((b) => b.usable).map((b) => b.name))
    const cpu = hw.engineBackends.find((b) => b.name === 'cpu')!
    expect(cpu.kernels).toMatch(/^sgemm (avx512|avx2|scalar), bf16 gemm (amx|avx512_bf16|avx512_fma|avx2_fma|portable)/)
    const flags = readFileSync('/proc/cpuinfo', 'utf8')
    if (!/\bamx_bf16\b/.test(flags)) expect(cpu.kernels).not.toContain('bf16 gemm amx')
    if (/\bavx512f\b/.test(flags)) expect(cpu.kernels).toContain('sgemm avx512')
    // bf16 on bf16 units wherever the CPU has bf16 instructions (AMX needs them too), and only there.
    expect(cpu.bf16Native).toBe(/\bavx512_bf16\b/.test(flags))
  })
})

describe('directory listing', () => {
  it('lists directories first, then files with sizes, without hidden entries', () => {
    const dir = mkdtempSync(join(os.tmpdir(), 'files-list-'))
    writeFileSync(join(dir, 'b.txt'), 'hello')
    writeFileSync(join(dir, '.hidden'), 'x')
    mkdirSync(join(dir, 'z-dir'))
    const listing = listDirectory(dir)
    expect(listing.dir).toBe(dir)
    expect(listing.parent).toBe(os.tmpdir())
    expect(listing.entries).toEqual([
      { name: 'z-dir', kind: 'dir', bytes: 0 },
      { name: 'b.txt', kind: 'file', bytes: 5 },
    ])
    expect(listDirectory('/').parent).toBeNull()
  })
})
