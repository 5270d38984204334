// What the New-run form section tests look up: a field by its path, a section of the generated form, a draft
// with one field of a section set, and the keys of the fields a section shows for a draft.
import { defaultDraft, withField } from '../../renderer/forms/config-draft'
import { allFields, runConfigForm, type SectionName } from '../../renderer/forms/schema-fields'
import { shownFields } from '../../renderer/forms/shown-fields'

export type Draft = ReturnType<typeof defaultDraft>

export const field = (path: string) => allFields().find((f) => f.path === path)!

export const formSection = (name: SectionName) => runConfigForm().find((s) => s.name === name)!

export const fieldSetter = (section: SectionName) => (draft: Draft, key: string, value: unknown) =>
  withField(draft, { section, key }, value)

// Fields with an issue (by path) are shown even where the draft would hide them.
export const shownKeys = (section: SectionName, draft: Draft, issues: string[] = []) =>
  shownFields(formSection(section), draft, (p) => issues.includes(p)).map((f) => f.key)
