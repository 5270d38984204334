// DOM ids for a form field's input, help and error text (aria-describedby ties them together).
export function fieldIds(path: string): { input: string; help: string; error: string } {
  const base = `field-${path.replace(/[^a-zA-Z0-9_-]/g, '-')}`
  return { input: base, help: `${base}-help`, error: `${base}-error` }
}

/** The aria-describedby of an input: its help, and its errors while there are any. */
export function describedBy(path: string, hasHelp: boolean, hasErrors: boolean): string | undefined {
  const ids = fieldIds(path)
  const parts = [hasHelp ? ids.help : null, hasErrors ? ids.error : null].filter((p): p is string => p !== null)
  return parts.length > 0 ? parts.join(' ') : undefined
}
