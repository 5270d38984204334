// Validation messages placed next to the field they are about: client-side from RunConfigSchema,
// server-side from the issues of runs.create (paths like "spec.config.model.top_k").
import { RunConfigSchema, type RunConfig } from '../../main/api/config'
import { issuesOf } from '../../main/api/contract'
import type { ConfigDraft } from './config-draft'

export interface FieldIssue {
  path: string
  message: string
}

export interface DraftCheck {
  /** The config with defaults filled in, when the draft is valid. */
  config: RunConfig | null
  issues: FieldIssue[]
}

export function checkDraft(draft: ConfigDraft | RunConfig): DraftCheck {
  const parsed = RunConfigSchema.safeParse(draft)
  return parsed.success ? { config: parsed.data, issues: [] } : { config: null, issues: issuesOf(parsed.error) }
}

/** A runs.create issue path in the form's terms: the spec's config fields lose "spec.config.", the rest "spec.". */
export function formPathOfServerIssue(path: string): string {
  return path.replace(/^spec\.config\./, '').replace(/^spec\./, '')
}

export interface PlacedIssues {
  byField: Record<string, string[]>
  /** Issues about no known field (shown at the top of the form, so none is lost). */
  unplaced: FieldIssue[]
}

/** Puts each issue on the deepest known field its path lies under ("model.n_experts.1" -> "model.n_experts"). */
export function placeIssues(issues: FieldIssue[], fieldPaths: readonly string[]): PlacedIssues {
  const known = new Set(fieldPaths)
  const byField: Record<string, string[]> = {}
  const unplaced: FieldIssue[] = []
  for (const issue of issues) {
    const segments = issue.path.split('.')
    let target: string | undefined
    for (let n = segments.length; n > 0 && target === undefined; n--) {
      const candidate = segments.slice(0, n).join('.')
      if (known.has(candidate)) target = candidate
    }
    if (target === undefined) unplaced.push(issue)
    else (byField[target] ??= []).push(issue.message)
  }
  return { byField, unplaced }
}
