// A small hash router: the view and its parameters live in location.hash (#/runs, #/run/<id>,
// #/compare?ids=a,b), so views are linkable, reload-safe and work the same in Electron and browser mode.
import { computed, ref } from 'vue'

export type ViewName = 'runs' | 'models' | 'new' | 'run' | 'compare' | 'replay' | 'checkpoints' | 'try' | 'hardware'

export interface Route {
  view: ViewName
  id: string | null // the run of 'run', 'replay', 'checkpoints' and 'try'
  query: Record<string, string>
}

const VIEWS: readonly ViewName[] = ['runs', 'models', 'new', 'run', 'compare', 'replay', 'checkpoints', 'try', 'hardware']

export function parseHash(hash: string): Route {
  const [path = '', search = ''] = hash.replace(/^#\/?/, '').split('?')
  const [view, id] = path.split('/')
  const query = Object.fromEntries(new URLSearchParams(search))
  const known = VIEWS.includes(view as ViewName) ? (view as ViewName) : 'runs'
  return { view: known, id: id ? decodeURIComponent(id) : null, query }
}

export function hashOf(route: Partial<Route> & { view: ViewName }): string {
  const search = new URLSearchParams(route.query ?? {}).toString()
  return `#/${route.view}${route.id ? `/${encodeURIComponent(route.id)}` : ''}${search ? `?${search}` : ''}`
}

const current = ref<Route>(parseHash(typeof window === 'undefined' ? '' : window.location.hash))

export function followHash(): () => void {
  const update = () => (current.value = parseHash(window.location.hash))
  window.addEventListener('hashchange', update)
  return () => window.removeEventListener('hashchange', update)
}

export function navigate(route: Partial<Route> & { view: ViewName }): void {
  window.location.hash = hashOf(route)
}

export function useRoute() {
  return computed(() => current.value)
}
