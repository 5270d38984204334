// Finds the bundled resources/ folder: walks up from this module (source tree, or out/main once
// bundled) and from the working directory to the package root named "moe-workbench".
import { existsSync, readFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const PACKAGE_NAME = 'moe-workbench'

function isPackageRoot(dir: string): boolean {
  const manifest = join(dir, 'package.json')
  if (!existsSync(manifest)) return false
  try {
    return (JSON.parse(readFileSync(manifest, 'utf8')) as { name?: unknown }).name === PACKAGE_NAME
  } catch {
    return false
  }
}

function findUp(start: string): string | null {
  for (let dir = resolve(start); ; dir = dirname(dir)) {
    if (isPackageRoot(dir)) return dir
    if (dirname(dir) === dir) return null
  }
}

export function packageRoot(): string {
  const here = dirname(fileURLToPath(import.meta.url))
  const root = findUp(here) ?? findUp(process.cwd())
  if (!root) throw new Error(`cannot find the ${PACKAGE_NAME} package root above ${here} or ${process.cwd()}`)
  return root
}

export const resourcesDir = (): string => join(packageRoot(), 'resources')

export const bundledCorpus = (): string => join(resourcesDir(), 'corpus', 'python-tutorial.txt')
