// Every view of the workbench, in navigation order. A view reads its run id and query from the route.
import { defineAsyncComponent, type Component } from 'vue'

import type { ViewName } from '../router'

export interface ViewEntry {
  name: ViewName
  title: string
  inNav: boolean // views of one run are reached from the Runs table, not the navigation bar
  component: Component
}

export const views: ViewEntry[] = [
  { name: 'runs', title: 'Runs', inNav: true, component: defineAsyncComponent(() => import('./RunsView.vue')) },
  { name: 'models', title: 'Models', inNav: true, component: defineAsyncComponent(() => import('./ModelsView.vue')) },
  { name: 'new', title: 'New run', inNav: true, component: defineAsyncComponent(() => import('./NewRunView.vue')) },
  { name: 'compare', title: 'Compare', inNav: true, component: defineAsyncComponent(() => import('./CompareView.vue')) },
  { name: 'run', title: 'Run', inNav: false, component: defineAsyncComponent(() => import('./RunView.vue')) },
  { name: 'replay', title: 'Replay', inNav: true, component: defineAsyncComponent(() => import('./ReplayView.vue')) },
  { name: 'checkpoints', title: 'Checkpoints', inNav: true, component: defineAsyncComponent(() => import('./CheckpointsView.vue')) },
  { name: 'try', title: 'Try it', inNav: true, component: defineAsyncComponent(() => import('./TryItView.vue')) },
  { name: 'hardware', title: 'Hardware', inNav: true, component: defineAsyncComponent(() => import('./HardwareView.vue')) },
]
