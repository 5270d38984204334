export { findPreset, listPresets, loadPreset } from './presets'
export type { Preset } from './presets'
export { bundledCorpus, packageRoot, resourcesDir } from './resources-dir'
