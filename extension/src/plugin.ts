/**
 * The JupyterLab plugin: the "Relays" side panel in the left sidebar, talking to the relay REST
 * API with the application's server settings. The MIME renderers live in `mime.ts`.
 */

import {
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { LabIcon } from '@jupyterlab/ui-components';

import { RelayApi } from './api.js';
import { KernelLike, setKernelFinder } from './kernel.js';
import { ShellLike, watchFront } from './follow.js';
import { RelayPanel } from './panel.js';

export { drawGraph, drawEdge, drawNode } from './draw.js';
export { GraphView } from './graphview.js';
export { runList, runTable, statusBadge, reusedBadge } from './runtable.js';
export { RelayApi, RelayApiError, RelayApiUnavailableError } from './api.js';
export { RelayPanel } from './panel.js';
export type { GraphDocument, GraphEdge, GraphNode } from './geometry.js';

const ICON_SVG =
  '<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 24 24">' +
  '<g class="jp-icon3" fill="#616161">' +
  '<circle cx="5" cy="5" r="3"/><circle cx="19" cy="12" r="3"/><circle cx="5" cy="19" r="3"/>' +
  '<path d="M7.6 6.4l8.6 4.3-.9 1.8-8.6-4.3zM7.6 17.6l8.6-4.3-.9-1.8-8.6 4.3z"/>' +
  '</g></svg>';

export const relayIcon = new LabIcon({ name: 'relay-notebook:relay', svgstr: ICON_SVG });

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'relay-notebook:panel',
  description: 'The Relays side panel: relays, releases and runs of the workspace.',
  autoStart: true,
  optional: [ILayoutRestorer],
  activate: (app: JupyterFrontEnd, restorer: ILayoutRestorer | null) => {
    // a run view's buttons talk to the kernel of the notebook the view is shown in
    setKernelFinder(node => {
      for (const widget of app.shell.widgets('main')) {
        if (widget.node.contains(node)) {
          const context = (widget as unknown as {
            sessionContext?: { session?: { kernel?: KernelLike | null } | null };
          }).sessionContext;
          return context?.session?.kernel ?? null;
        }
      }
      return null;
    });
    const panel = new RelayPanel(new RelayApi(app.serviceManager.serverSettings));
    panel.title.icon = relayIcon;
    app.shell.add(panel, 'left', { rank: 650 });
    restorer?.add(panel, panel.id);
    // the panel offers the workspace of the notebook in front when it is another one, and
    // lists what a cell run there saved or started
    watchFront(
      app.shell as unknown as ShellLike,
      (front, force) => void panel.follow(front, force),
      () => panel.workspaceBar.knowsFront(),
      () => {
        if (panel.isVisible) {
          void panel.refresh();
        }
      }
    );
  }
};

export default plugin;
