// Where this code runs from: the source tree under vitest (ES modules) or a bundle under out/main
// (CommonJS, where import.meta is rewritten or absent). Both give a directory and a require().
import { createRequire } from 'node:module'
import { dirname } from 'node:path'
import { fileURLToPath } from 'node:url'

export function moduleFile(): string {
  return typeof __filename === 'string' ? __filename : fileURLToPath(import.meta.url)
}

export const moduleDir = (): string => dirname(moduleFile())

/** A require() that works in both module systems (for .node files and Electron's built-in module). */
export const requireHere = (): NodeJS.Require => createRequire(moduleFile())
