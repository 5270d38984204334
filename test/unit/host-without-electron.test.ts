// The host (main/host/) runs under plain Node for the CLI and browser mode: nothing in it may load Electron;
// the Electron entry injects what is Electron's (the utility-process engine port) through HostOptions.
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'

import { describe, expect, it } from 'vitest'

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? sources(join(dir, entry.name)) : entry.name.endsWith('.ts') ? [join(dir, entry.name)] : [],
  )
}

describe('host without Electron', () => {
  it('no host module imports or requires electron', () => {
    const offenders = sources(join(__dirname, '../../main/host')).filter((file) =>
      /from 'electron'|import\('electron'\)|\('electron'\)/.test(readFileSync(file, 'utf8')),
    )
    expect(offenders).toEqual([])
  })
})
