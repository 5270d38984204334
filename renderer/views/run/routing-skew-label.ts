// How the Run view marks a routing-skew experiment, so its load balance and losses are never read as a
// trained router's: a short badge ("routing skew: hot 95% (experiment)") and a title saying what was
// drawn. Null when the router routed (no section, or distribution none).
import type { RoutingSkewConfig, RunConfig } from '../../../main/api/config'

export interface SkewLabel {
  badge: string
  title: string
}

function drawn(skew: RoutingSkewConfig): { short: string; long: string } {
  if (skew.distribution === 'hot') {
    const percent = `${+(100 * skew.hot_fraction).toFixed(2)}%`
    return { short: `hot ${percent}`, long: `expert 0 is the first choice of ${percent} of tokens, the other choices uniform` }
  }
  if (skew.distribution === 'zipf') return { short: `zipf s=${skew.zipf_s}`, long: `expert rank r drawn with weight 1/(r+1)^${skew.zipf_s}` }
  return { short: 'uniform', long: 'experts drawn uniformly' }
}

export function routingSkewLabel(config: RunConfig): SkewLabel | null {
  const skew = config.routing_skew
  if (!skew || skew.distribution === 'none') return null
  const { short, long } = drawn(skew)
  return {
    badge: `routing skew: ${short} (experiment)`,
    title: `The router's choices were replaced by seeded draws (seed ${skew.seed}): ${long}. The rest of each step is real.`,
  }
}
