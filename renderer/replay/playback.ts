// The scrub/play state machine of the replay: a current step inside [first, last], playing or not, at
// a speed in steps per second. Pure, so the view drives it from key presses, the slider and animation
// frames, and tests drive it with made-up times.

export interface PlaybackState {
  first: number
  last: number
  step: number
  playing: boolean
  /** Steps per second while playing. */
  speed: number
  /** Fraction of a step accumulated by ticks, so slow speeds still advance. */
  carry: number
}

export type PlaybackAction =
  | { type: 'seek'; step: number }
  | { type: 'stepBy'; delta: number }
  | { type: 'play' }
  | { type: 'pause' }
  | { type: 'toggle' }
  | { type: 'tick'; elapsedMs: number }
  | { type: 'setSpeed'; speed: number }
  | { type: 'setRange'; first: number; last: number }

export const PLAYBACK_SPEEDS = [1, 5, 20, 100, 500] as const

export function initialPlayback(first: number, last: number, step = first, speed = 20): PlaybackState {
  return { first, last, step: clamp(step, first, last), playing: false, speed, carry: 0 }
}

function clamp(step: number, first: number, last: number): number {
  return Math.min(last, Math.max(first, Math.round(step)))
}

export function playback(state: PlaybackState, action: PlaybackAction): PlaybackState {
  switch (action.type) {
    case 'seek':
      return { ...state, step: clamp(action.step, state.first, state.last), carry: 0 }
    case 'stepBy':
      // Stepping by hand takes over from playing.
      return { ...state, step: clamp(state.step + action.delta, state.first, state.last), playing: false, carry: 0 }
    case 'play':
      // Playing from the end starts over.
      return { ...state, playing: true, carry: 0, step: state.step >= state.last ? state.first : state.step }
    case 'pause':
      return { ...state, playing: false, carry: 0 }
    case 'toggle':
      return playback(state, { type: state.playing ? 'pause' : 'play' })
    case 'tick': {
      if (!state.playing) return state
      const advance = state.carry + (state.speed * Math.max(0, action.elapsedMs)) / 1000
      const whole = Math.floor(advance)
      if (whole === 0) return { ...state, carry: advance }
      const step = Math.min(state.last, state.step + whole)
      return { ...state, step, carry: advance - whole, playing: step < state.last }
    }
    case 'setSpeed':
      return { ...state, speed: Math.max(0.1, action.speed) }
    case 'setRange': {
      const last = Math.max(action.first, action.last)
      return { ...state, first: action.first, last, step: clamp(state.step, action.first, last) }
    }
  }
}
