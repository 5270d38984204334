// The renderer's only door to main: `window.api.invoke` and `window.api.on`, on channels derived from
// the contract. Names outside the contract are refused here, before anything crosses to main.
import { contextBridge, ipcRenderer, type IpcRendererEvent } from 'electron'

import { eventChannel, requestChannel } from '../main/api/contract'
import { isEventName, isRequestName, type PreloadApi, type Reply } from '../main/api/wire'

const api: PreloadApi = {
  invoke(name, params) {
    if (!isRequestName(name)) return Promise.reject(new Error(`unknown request "${name}"`))
    return ipcRenderer.invoke(requestChannel(name), params) as Promise<Reply>
  },
  on(event, listener) {
    if (!isEventName(event)) throw new Error(`unknown event "${event}"`)
    const channel = eventChannel(event)
    // The IPC event object is withheld: it carries `sender`, i.e. ipcRenderer itself.
    const forward = (_event: IpcRendererEvent, payload: unknown) => listener(payload)
    ipcRenderer.on(channel, forward)
    return () => {
      ipcRenderer.removeListener(channel, forward)
    }
  },
}

contextBridge.exposeInMainWorld('api', api)
