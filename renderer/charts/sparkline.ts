// A loss sparkline as an SVG path: cheap enough for every row of the Runs table (no chart instance
// per row). Missing values break the line rather than pretending the curve was continuous.
export function sparklinePath(values: readonly (number | null)[], width: number, height: number, pad = 1): string {
  const finite = values.filter((v): v is number => v !== null && Number.isFinite(v))
  if (finite.length < 2) return ''
  const min = Math.min(...finite)
  const max = Math.max(...finite)
  const span = max - min || 1
  const x = (i: number) => pad + (i / (values.length - 1)) * (width - 2 * pad)
  const y = (v: number) => pad + (1 - (v - min) / span) * (height - 2 * pad)
  let path = ''
  let penDown = false
  values.forEach((v, i) => {
    if (v === null || !Number.isFinite(v)) {
      penDown = false
      return
    }
    path += `${penDown ? 'L' : 'M'}${x(i).toFixed(1)},${y(v).toFixed(1)}`
    penDown = true
  })
  return path
}
