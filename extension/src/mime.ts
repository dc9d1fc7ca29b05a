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
import { RunHeader, ViewAction } from './header.js';
import { CommLike, closeQuietly, findKernel } from './kernel.js';
import { readRuns } from './format.js';
import { runTable } from './runtable.js';

export const GRAPH_MIME_TYPE = 'application/vnd.relay.graph+json';
export const RUNS_MIME_TYPE = 'application/vnd.relay.runs+json';
/** The kernel's comm target for run views' buttons (relay_notebook/magics/runs.py). */
export const COMM_TARGET = 'relay_notebook.view';

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

/** Renders a relay-graph/v1 document with pan, zoom and node details; a run graph also gets
 * its run header, whose buttons ask the notebook's kernel to run or recover (see
 * relay_notebook/magics/runs.py) and show that run live, storing its final state here. */
export class RelayGraphRenderer extends Widget implements IRenderMime.IRenderer {
  private readonly mimeType: string;
  private view: GraphView | null = null;
  private header: RunHeader | null = null;
  private model: IRenderMime.IMimeModel | null = null;
  private comm: CommLike | null = null;
  private current: GraphDocument | null = null;

  constructor(options: IRenderMime.IRendererOptions) {
    super();
    this.mimeType = options.mimeType;
    this.addClass('jp-RelayGraphOutput');
  }

  renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    this.model = model;
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
      this.view = new GraphView({
        maxHeight: 600,
        onFork: (call, draft) => {
          const runId = this.current?.run?.run_id;
          if (runId) {
            this.act({ action: 'fork', run_id: runId, from: call, draft });
          }
        }
      });
      this.header = new RunHeader(action => this.act(action));
      this.node.replaceChildren(this.header.node, this.view.node);
    }
    this.showGraph(graph);
    return Promise.resolve();
  }

  private showGraph(graph: GraphDocument): void {
    this.current = graph;
    this.header?.update(graph);
    this.view?.setGraph(graph);
  }

  /** Ask the kernel for `action` and show the run it starts as it goes. */
  private act(action: ViewAction): void {
    const header = this.header!;
    const kernel = findKernel(this.node);
    if (kernel === null) {
      header.say(
        'These buttons need this notebook\'s kernel: start it and run %load_ext relay_notebook.',
        true
      );
      return;
    }
    // the previous action's comm: closing one the kernel already closed (no %load_ext yet) or
    // one of a kernel since replaced throws, which left the buttons dead until a page reload
    closeQuietly(this.comm);
    this.comm = null;
    let heard = false;
    const comm = kernel.createComm(COMM_TARGET);
    this.comm = comm;
    header.setBusy(true);
    header.say(
      action.action === 'recover'
        ? `recovering ${action.run_id}…`
        : action.action === 'send'
          ? `sending ${JSON.stringify(action.message)} on topic "${action.topic}" to ${action.run_id}…`
          : action.action === 'fork'
          ? `forking ${action.run_id} from ${action.from}…`
          : 'starting a run…'
    );
    // a kernel that is gone (shut down, restarting) never answers: say so instead of waiting
    const silence = window.setTimeout(() => {
      if (!heard) {
        header.setBusy(false);
        header.say(
          'The kernel did not answer within 20 s: is it running? Start it, run ' +
            '%load_ext relay_notebook, then press the button again.',
          true
        );
      }
    }, 20_000);
    comm.onMsg = msg => {
      heard = true;
      window.clearTimeout(silence);
      const data = msg.content.data as
        | { type: 'view'; final: boolean; bundle: Record<string, unknown> }
        | { type: 'error'; message: string; bundle?: Record<string, unknown> };
      if (data.type === 'error') {
        // the run as it is now (e.g. answered elsewhere meanwhile), then why nothing started
        const now = data.bundle ? readGraph(data.bundle[GRAPH_MIME_TYPE]) : null;
        if (now !== null && data.bundle) {
          this.showGraph(now);
          this.model?.setData({ data: data.bundle as IRenderMime.IMimeModel['data'] });
        }
        header.setBusy(false);
        header.say(data.message, true);
        closeQuietly(comm);
        this.comm = null;
        return;
      }
      const graph = readGraph(data.bundle[GRAPH_MIME_TYPE]);
      if (graph !== null) {
        this.showGraph(graph);
        header.say(data.final ? '' : 'live: the kernel is sending this run as it goes');
      }
      if (data.final) {
        header.setBusy(false);
        // the output keeps the run this view shows now, so a saved notebook has it too
        this.model?.setData({ data: data.bundle as IRenderMime.IMimeModel['data'] });
        const status = graph?.run?.status;
        if (status === 'succeeded' || status === 'failed') {
          closeQuietly(comm);
          this.comm = null;
        } // else the kernel goes on sending it when it changes (answered, recovered elsewhere)
      }
    };
    comm.onClose = () => {
      window.clearTimeout(silence);
      if (this.comm === comm) {
        this.comm = null; // closed by the kernel: the next press opens a new one
      }
      if (!heard) {
        header.setBusy(false);
        header.say(
          'The kernel did not answer: run %load_ext relay_notebook in this notebook, then ' +
            'press the button again.',
          true
        );
      }
    };
    comm.open(action);
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
