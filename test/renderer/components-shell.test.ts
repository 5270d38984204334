// Shell logic behind the components: keyboard shortcuts, byte formats, chart themes.
import { describe, expect, it } from 'vitest'

import { echartsTheme, seriesColor } from '../../renderer/charts/echarts-theme'
import { formatBytes } from '../../renderer/format'
import { matchShortcut, SHORTCUTS } from '../../renderer/shortcuts'

describe('keyboard shortcuts', () => {
  it('matches single keys and g-sequences, waiting on a prefix', () => {
    expect(matchShortcut(['?'])).toEqual({ kind: 'help' })
    expect(matchShortcut(['g'])).toBe('pending')
    expect(matchShortcut(['g', 'h'])).toEqual({ kind: 'go', view: 'hardware' })
    expect(matchShortcut(['g', 'x'])).toBeNull()
    expect(matchShortcut(['x'])).toBeNull()
    expect(new Set(SHORTCUTS.map((s) => s.keys)).size).toBe(SHORTCUTS.length)
  })
})

describe('formats and themes', () => {
  it('formats bytes in binary units', () => {
    expect(formatBytes(512)).toBe('512 B')
    expect(formatBytes(1536)).toBe('1.50 KiB')
    expect(formatBytes(25 * 2 ** 30)).toBe('25.0 GiB')
    expect(formatBytes(-1)).toBe('—')
  })

  it('gives ECharts a palette per theme', () => {
    expect(echartsTheme('dark')['color']).not.toEqual(echartsTheme('light')['color'])
    expect(seriesColor('light', 0)).toBe((echartsTheme('light')['color'] as string[])[0])
  })
})
