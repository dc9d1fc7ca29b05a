/**
 * MIME renderers for relay outputs: `application/vnd.relay.graph+json` (a flow or run graph)
 * and `application/vnd.relay.runs+json` (a run-history table).
 *
 * Both have rank 0, so JupyterLab prefers them over the `image/svg+xml` and `text/html`
 * fallbacks the Python side puts in the same bundle; without this extension (nbconvert, GitHub)
 * the fallback shows instead. Saved notebooks render from their outputs, without a kernel.
 */

import type { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';

import type { GraphDocument } from './geometry.js';
import { GraphView } from './graphview.js';
import { readRuns } from './format.js';
import { runTable } from './runtable.js';

export const GRAPH_MIME_TYPE = 'application/vnd.relay.graph+json';
export const RUNS_MIME_TYPE = 'application/vnd.relay.runs+json';

function readGraph(data: unknown): GraphDocument | null {
  const doc = data as Partial<GraphDocument> | null;
  if (!doc || typeof doc !== 'object' || !Array.isArray(doc.nodes) || !Array.isArray(doc.edges)) {
    return null;
  }
  return doc as GraphDocument;
}

function problem(node: HTMLElement, message: string): void {
  const box = document.createElement('div');
  box.className = 'jp-RelayError';
  box.textContent = message;
  node.replaceChildren(box);
}

/** Renders a relay-graph/v1 document with pan, zoom and node details. */
export class RelayGraphRenderer extends Widget implements IRenderMime.IRenderer {
  private readonly mimeType: string;
  private view: GraphView | null = null;

  constructor(options: IRenderMime.IRendererOptions) {
    super();
    this.mimeType = options.mimeType;
    this.addClass('jp-RelayGraphOutput');
  }

  renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    const graph = readGraph(model.data[this.mimeType]);
    if (graph === null) {
      problem(
        this.node,
        `This ${GRAPH_MIME_TYPE} output is not a relay-graph/v1 document (expected "nodes" and ` +
          '"edges" arrays). Re-run the cell that displayed it.'
      );
      return Promise.resolve();
    }
    if (this.view === null) {
      this.view = new GraphView({ maxHeight: 600 });
      this.node.replaceChildren(this.view.node);
    }
    this.view.setGraph(graph);
    return Promise.resolve();
  }

  protected override onAfterAttach(): void {
    this.view?.fit(false);
  }

  override dispose(): void {
    this.view?.dispose();
    this.view = null;
    super.dispose();
  }
}

/** Renders `{"runs": [...]}` as the run-history table. */
export class RelayRunsRenderer extends Widget implements IRenderMime.IRenderer {
  private readonly mimeType: string;

  constructor(options: IRenderMime.IRendererOptions) {
    super();
    this.mimeType = options.mimeType;
    this.addClass('jp-RelayRunsOutput');
  }

  renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    const data = model.data[this.mimeType] as { runs?: unknown } | null;
    if (!data || !Array.isArray(data.runs)) {
      problem(
        this.node,
        `This ${RUNS_MIME_TYPE} output has no "runs" list. Re-run the cell that displayed it.`
      );
      return Promise.resolve();
    }
    const runs = readRuns(data);
    const relays = new Set(runs.map(r => r.relay));
    this.node.replaceChildren(runTable(runs, { showRelay: relays.size > 1 }));
    return Promise.resolve();
  }
}

export const graphRendererFactory: IRenderMime.IRendererFactory = {
  safe: true,
  mimeTypes: [GRAPH_MIME_TYPE],
  defaultRank: 0,
  createRenderer: options => new RelayGraphRenderer(options)
};

export const runsRendererFactory: IRenderMime.IRendererFactory = {
  safe: true,
  mimeTypes: [RUNS_MIME_TYPE],
  defaultRank: 0,
  createRenderer: options => new RelayRunsRenderer(options)
};

const extensions: IRenderMime.IExtension[] = [
  {
    id: 'relay-notebook:graph-renderer',
    description: 'Renders relay flow and run graphs.',
    rendererFactory: graphRendererFactory,
    rank: 0,
    dataType: 'json'
  },
  {
    id: 'relay-notebook:runs-renderer',
    description: 'Renders relay run-history tables.',
    rendererFactory: runsRendererFactory,
    rank: 0,
    dataType: 'json'
  }
];

export default extensions;
