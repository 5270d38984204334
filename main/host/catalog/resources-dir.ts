// Finds the bundled resources/ folder under the package root, looked for above this module (the
// source tree, or out/main once bundled) and then above the working directory.
import { join } from 'node:path'

import { findPackageRoot, PACKAGE_NAME } from '../engine/addon'
import { moduleDir } from '../engine/module-location'

export function packageRoot(): string {
  const root = findPackageRoot(moduleDir()) ?? findPackageRoot(process.cwd())
  if (!root) throw new Error(`cannot find the ${PACKAGE_NAME} package root above ${moduleDir()} or ${process.cwd()}`)
  return root
}

export const resourcesDir = (): string => join(packageRoot(), 'resources')

export const bundledCorpus = (): string => join(resourcesDir(), 'corpus', 'python-tutorial.txt')
