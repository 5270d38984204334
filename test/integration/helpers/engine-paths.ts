// The repository root, found the way the addon loader finds it.
import { findPackageRoot } from '../../../main/host/engine/addon'

export const repoRoot = findPackageRoot(import.meta.dirname) as string
