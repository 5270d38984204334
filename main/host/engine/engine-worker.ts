// Entry of an engine process (bundled to out/main/engine-worker.js): one run per process, so a crash,
// an abort or an OOM kill of the engine takes down only this process.
import { connectToParent } from './parent-channel'
import { TrainingJob } from './training-job'

const parent = connectToParent()
const job = new TrainingJob(parent)
parent.onMessage((msg) => job.handle(msg))
process.on('uncaughtException', (e) => job.crash(e))
// The host went away (fork mode): stop at the next step boundary; the final checkpoint is still saved.
process.on('disconnect', () => job.handle({ type: 'stop' }))
