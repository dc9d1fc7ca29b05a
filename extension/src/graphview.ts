/**
 * An interactive graph view in plain DOM: the drawn graph with pan (drag), zoom (wheel and
 * buttons) and a details panel for the clicked node. Used by the MIME renderer and the panel.
 *
 * Design: a plain wheel over a notebook output scrolls the notebook, always: the view takes the
 * wheel for zooming only with Ctrl/⌘ held (which is also what a trackpad pinch sends). The first
 * draw fits the whole drawing (edge labels included) into the output's width and the height
 * cap, centred; until the user pans or zooms, the view refits itself when its width changes.
 */

import type { GraphDocument, GraphNode } from './geometry.js';
import { describeGraph, isLaidOut } from './geometry.js';
import { drawGraph, DrawnGraph } from './draw.js';
import { nodeFacts } from './format.js';
import { h } from './dom.js';

export interface GraphViewOptions {
  /** Tallest the drawing area may get, in px (it is shorter for short graphs). */
  maxHeight?: number;
  /** Smallest scale the initial fit may choose. */
  minFitScale?: number;
  /** Called with the selected node, or null when the selection is cleared. */
  onSelect?: (node: GraphNode | null) => void;
  /** Offered in a run graph's node details: fork the run from that call (`STEP#N`). */
  onFork?: (call: string, draft: boolean) => void;
  /** Offered for an agent call's `execution/call-N` folder (the side panel shows its files);
   * without it, the details say which magic shows them. */
  onFiles?: (folder: string) => void;
}

const MIN_SCALE = 0.05;
const MAX_SCALE = 4;
const DRAG_THRESHOLD = 3;

/** A graph with pan, zoom and node details; put `view.node` anywhere in the DOM. */
export class GraphView {
  readonly node: HTMLDivElement;
  private readonly caption: HTMLSpanElement;
  private readonly area: HTMLDivElement;
  private readonly notes: HTMLUListElement;
  private readonly details: HTMLDivElement;
  private readonly options: GraphViewOptions;
  private drawn: DrawnGraph | null = null;
  private byId = new Map<string, GraphNode>();
  private selected: string | null = null;
  private runId: string | null = null;
  private scale = 1;
  private tx = 0;
  private ty = 0;
  private touched = false;
  private drag: { x: number; y: number; tx: number; ty: number; moved: boolean; id: number } | null =
    null;
  private resizeObserver: ResizeObserver | null = null;
  private lastWidth = 0;

  constructor(options: GraphViewOptions = {}) {
    this.options = options;
    this.node = h('div', 'jp-RelayGraph');
    const toolbar = h('div', 'jp-RelayGraph-toolbar');
    this.caption = h('span', 'jp-RelayGraph-caption');
    const hint = h('span', 'jp-RelayGraph-hint', 'drag to pan · Ctrl/⌘ + wheel to zoom');
    toolbar.append(this.caption, hint);
    for (const [label, title, action] of [
      ['−', 'Zoom out', () => this.zoomBy(1 / 1.25)],
      ['+', 'Zoom in', () => this.zoomBy(1.25)],
      ['fit', 'Fit the whole graph, centred', () => this.fit(true)],
      ['1:1', 'Actual size', () => this.setTransform(1, 0, 0)]
    ] as [string, string, () => void][]) {
      const button = h('button', 'jp-RelayGraph-button', label);
      button.type = 'button';
      button.title = title;
      button.addEventListener('click', () => {
        this.touched = true;
        action();
      });
      toolbar.appendChild(button);
    }
    this.area = h('div', 'jp-RelayGraph-viewport');
    this.area.tabIndex = 0;
    // arrows and +/- pan and zoom here instead of moving between notebook cells
    this.area.setAttribute('data-lm-suppress-shortcuts', '');
    this.notes = h('ul', 'jp-RelayGraph-notes');
    this.details = h('div', 'jp-RelayGraph-details');
    this.details.hidden = true;
    this.node.append(toolbar, this.area, this.notes, this.details);
    this.area.addEventListener('pointerdown', this.onPointerDown);
    this.area.addEventListener('pointermove', this.onPointerMove);
    this.area.addEventListener('pointerup', this.onPointerUp);
    this.area.addEventListener('pointercancel', this.onPointerUp);
    this.area.addEventListener('wheel', this.onWheel, { passive: false });
    this.area.addEventListener('click', this.onClick);
    this.area.addEventListener('keydown', this.onKey);
    if (typeof ResizeObserver !== 'undefined') {
      this.resizeObserver = new ResizeObserver(() => this.onResize());
      this.resizeObserver.observe(this.area);
    }
  }

  /** Draw `graph` (positions must be in it), keeping the selection if that node still exists. */
  setGraph(graph: GraphDocument): void {
    this.byId = new Map();
    for (const n of graph.nodes) {
      if (!this.byId.has(n.id)) {
        this.byId.set(n.id, n);
      }
    }
    this.node.dataset['nodes'] = String(graph.nodes.length);
    this.node.dataset['kind'] = graph.kind ?? 'flow';
    const run = (graph as { run?: { run_id?: unknown } }).run;
    this.runId = typeof run?.run_id === 'string' ? run.run_id : null;
    this.caption.textContent = describeGraph(graph);
    this.area.replaceChildren();
    this.notes.replaceChildren();
    if (!isLaidOut(graph)) {
      this.drawn = null;
      this.area.appendChild(
        h(
          'div',
          'jp-RelayGraph-error',
          'This graph has no node positions, so it cannot be drawn here. ' +
            'Lay it out in Python first (relay_notebook.source.layout.layout_graph).'
        )
      );
      this.showDetails(null);
      return;
    }
    const drawn = drawGraph(graph);
    drawn.svg.removeAttribute('viewBox');
    drawn.svg.setAttribute('width', '100%');
    this.drawn = drawn;
    this.area.appendChild(drawn.svg);
    for (const note of graph.notes ?? []) {
      this.notes.appendChild(h('li', '', note));
    }
    const keep = this.selected !== null && this.byId.has(this.selected) ? this.selected : null;
    this.select(keep);
    if (this.touched) {
      this.apply();
    } else {
      this.fit(false);
    }
  }

  /** Select a node by id (null clears it) and show its details. */
  select(id: string | null): void {
    if (this.drawn && this.selected !== null) {
      this.drawn.nodes.get(this.selected)?.classList.remove('relay-node--selected');
    }
    this.selected = id !== null && this.byId.has(id) ? id : null;
    const node = this.selected !== null ? this.byId.get(this.selected) ?? null : null;
    if (this.drawn && this.selected !== null) {
      this.drawn.nodes.get(this.selected)?.classList.add('relay-node--selected');
    }
    this.showDetails(node);
    this.options.onSelect?.(node);
  }

  /** Zoom by `factor` around a point of the drawing area (its centre by default). */
  zoomBy(factor: number, px?: number, py?: number): void {
    const x = px ?? this.area.clientWidth / 2;
    const y = py ?? this.area.clientHeight / 2;
    const next = Math.min(MAX_SCALE, Math.max(MIN_SCALE, this.scale * factor));
    const k = next / this.scale;
    this.setTransform(next, x - (x - this.tx) * k, y - (y - this.ty) * k);
  }

  /**
   * Fit the drawing into the output's width and the height cap, centred. `whole` (the fit
   * button) may shrink below the smallest initial scale to show everything at once.
   */
  fit(whole: boolean): void {
    if (!this.drawn) {
      return;
    }
    const width = this.area.clientWidth;
    const maxHeight = this.options.maxHeight ?? 600;
    const box = this.bounds();
    const least = whole ? MIN_SCALE : this.options.minFitScale ?? 0.3;
    let scale = 1;
    if (width > 0 && box.w > width) {
      scale = width / box.w;
    }
    if (box.h * scale > maxHeight) {
      scale = maxHeight / box.h;
    }
    scale = Math.min(1, Math.max(scale, least));
    const viewHeight = Math.max(Math.min(box.h * scale, maxHeight), 96);
    this.drawn.svg.setAttribute('height', String(Math.ceil(viewHeight)));
    const tx = width > 0 ? (width - box.w * scale) / 2 - box.x * scale : -box.x * scale;
    const spare = viewHeight - box.h * scale;
    const ty = spare > 0 ? spare / 2 - box.y * scale : -box.y * scale;
    this.setTransform(scale, Math.max(tx, -box.x * scale), ty);
  }

  /** The drawing's extent, edge labels included (the laid-out size until it is on screen). */
  private bounds(): { x: number; y: number; w: number; h: number } {
    const drawn = this.drawn!;
    const fallback = { x: 0, y: 0, w: drawn.width, h: drawn.height };
    try {
      // in the group's own coordinates: its pan-and-zoom transform does not count
      const b = drawn.viewport.getBBox();
      if (!(b.width > 0 && b.height > 0)) {
        return fallback;
      }
      const pad = 8;
      const x = Math.min(0, b.x - pad);
      const y = Math.min(0, b.y - pad);
      const right = Math.max(drawn.width, b.x + b.width + pad);
      const bottom = Math.max(drawn.height, b.y + b.height + pad);
      return { x, y, w: right - x, h: bottom - y };
    } catch {
      return fallback; // not rendered yet (getBBox needs layout)
    }
  }

  /** The current `[scale, tx, ty]` of the drawing. */
  get transform(): [number, number, number] {
    return [this.scale, this.tx, this.ty];
  }

  dispose(): void {
    this.resizeObserver?.disconnect();
    this.resizeObserver = null;
    this.node.remove();
  }

  private setTransform(scale: number, tx: number, ty: number): void {
    this.scale = scale;
    this.tx = tx;
    this.ty = ty;
    this.apply();
  }

  private apply(): void {
    this.drawn?.viewport.setAttribute(
      'transform',
      `translate(${this.tx.toFixed(1)},${this.ty.toFixed(1)}) scale(${this.scale.toFixed(4)})`
    );
    this.node.dataset['scale'] = this.scale.toFixed(3);
  }

  private showDetails(node: GraphNode | null): void {
    this.details.replaceChildren();
    this.details.hidden = node === null;
    if (node === null) {
      return;
    }
    const header = h('div', 'jp-RelayGraph-detailsHeader');
    header.appendChild(h('strong', '', node.label));
    const close = h('button', 'jp-RelayGraph-button', '×');
    close.type = 'button';
    close.title = 'Close the details';
    close.addEventListener('click', () => this.select(null));
    header.appendChild(close);
    const { facts, json } = nodeFacts(node);
    const list = h('table', 'jp-RelayGraph-facts');
    for (const [name, value] of facts) {
      const row = list.insertRow();
      row.append(h('th', '', name), h('td', '', value));
    }
    const pre = h('pre', 'jp-RelayGraph-json', json);
    this.details.append(header, list);
    const forks = this.forkButtons(node);
    if (forks) {
      this.details.append(forks);
    }
    const files = this.fileLinks(node);
    if (files) {
      this.details.append(files);
    }
    this.details.append(h('div', 'jp-RelayGraph-jsonTitle', 'details'), pre);
  }

  /** "fork from NAME#N" for each call of a run graph's node, when the view can fork. */
  private forkButtons(node: GraphNode): HTMLDivElement | null {
    const onFork = this.options.onFork;
    const calls = node.details?.['calls'];
    if (!onFork || !Array.isArray(calls)) {
      return null;
    }
    const box = h('div', 'jp-RelayGraph-forks');
    for (const call of calls as Record<string, unknown>[]) {
      const name = call['name'];
      const nth = call['occurrence'];
      if (typeof name !== 'string' || typeof nth !== 'number') {
        continue;
      }
      const target = `${name}#${nth}`;
      for (const [label, draft, title] of [
        [`fork from ${target}`, false, `A new run: calls before ${target} copied, the rest run fresh`],
        ['onto the draft', true, `The same fork, running the relay's current draft (after a fix)`]
      ] as [string, boolean, string][]) {
        const button = h('button', 'jp-RelayGraph-button jp-RelayGraph-fork', label);
        button.type = 'button';
        button.title = title;
        button.dataset['call'] = target;
        button.addEventListener('click', () => onFork(target, draft));
        box.appendChild(button);
      }
    }
    return box.childElementCount ? box : null;
  }

  /** An agent call's `execution/call-N` folders: a link in the panel, the magic elsewhere. */
  private fileLinks(node: GraphNode): HTMLDivElement | null {
    const calls = node.details?.['calls'];
    if (!Array.isArray(calls)) {
      return null;
    }
    const box = h('div', 'jp-RelayGraph-files');
    const onFiles = this.options.onFiles;
    for (const call of calls as Record<string, unknown>[]) {
      const folders = call['folders'];
      if (!Array.isArray(folders)) {
        continue;
      }
      for (const folder of folders) {
        if (typeof folder !== 'string') {
          continue;
        }
        const row = h('div', 'jp-RelayGraph-filesRow');
        row.dataset['folder'] = folder;
        row.append(h('span', '', `files of ${String(call['name'])}#${String(call['occurrence'])}: `));
        if (onFiles) {
          const link = h('a', 'jp-RelayGraph-filesLink', folder);
          link.href = '#';
          link.title = `Show the files in execution/${folder}`;
          link.addEventListener('click', event => {
            event.preventDefault();
            onFiles(folder);
          });
          row.append(link);
        } else {
          const magic = `%relay files ${this.runId ?? 'RUN'} ${folder}`;
          const code = h('code', 'jp-RelayGraph-filesMagic', magic);
          code.title = "Type this in a cell to see the call's files";
          row.append(code);
        }
        box.appendChild(row);
      }
    }
    return box.childElementCount ? box : null;
  }

  private onResize(): void {
    const width = this.area.clientWidth;
    if (width !== this.lastWidth && width > 0) {
      this.lastWidth = width;
      if (!this.touched) {
        this.fit(false);
      }
    }
  }

  private onPointerDown = (event: PointerEvent): void => {
    if (event.button !== 0) {
      return;
    }
    this.area.focus({ preventScroll: true });
    this.drag = {
      x: event.clientX,
      y: event.clientY,
      tx: this.tx,
      ty: this.ty,
      moved: false,
      id: event.pointerId
    };
  };

  private onPointerMove = (event: PointerEvent): void => {
    const drag = this.drag;
    if (!drag || drag.id !== event.pointerId) {
      return;
    }
    const dx = event.clientX - drag.x;
    const dy = event.clientY - drag.y;
    if (!drag.moved && Math.hypot(dx, dy) < DRAG_THRESHOLD) {
      return;
    }
    if (!drag.moved) {
      drag.moved = true;
      this.touched = true;
      // capture only once it is a drag, so a plain click still reaches the node it is on
      this.area.setPointerCapture(event.pointerId);
      this.area.classList.add('jp-mod-dragging');
    }
    this.setTransform(this.scale, drag.tx + dx, drag.ty + dy);
  };

  private onPointerUp = (event: PointerEvent): void => {
    const drag = this.drag;
    if (!drag || drag.id !== event.pointerId) {
      return;
    }
    if (drag.moved) {
      this.area.releasePointerCapture(event.pointerId);
      this.area.classList.remove('jp-mod-dragging');
      // swallow the click that follows a drag
      const swallow = (e: Event) => e.stopPropagation();
      this.area.addEventListener('click', swallow, { capture: true, once: true });
      setTimeout(() => this.area.removeEventListener('click', swallow, { capture: true }), 0);
    }
    this.drag = null;
  };

  private onWheel = (event: WheelEvent): void => {
    if (!(event.ctrlKey || event.metaKey) || !this.drawn) {
      return; // the page scrolls
    }
    event.preventDefault();
    this.touched = true;
    const rect = this.area.getBoundingClientRect();
    const unit = event.deltaMode === 1 ? 16 : event.deltaMode === 2 ? 400 : 1;
    const factor = Math.exp(-event.deltaY * unit * 0.0015);
    this.zoomBy(factor, event.clientX - rect.left, event.clientY - rect.top);
  };

  private onClick = (event: MouseEvent): void => {
    const target = event.target as Element | null;
    const group = target?.closest?.('.relay-node');
    const id = group?.getAttribute('data-node-id') ?? null;
    this.select(id !== null && id === this.selected ? null : id);
  };

  private onKey = (event: KeyboardEvent): void => {
    const step = 40;
    const moves: Record<string, [number, number]> = {
      ArrowLeft: [step, 0],
      ArrowRight: [-step, 0],
      ArrowUp: [0, step],
      ArrowDown: [0, -step]
    };
    const move = moves[event.key];
    if (move) {
      event.preventDefault();
      this.touched = true;
      this.setTransform(this.scale, this.tx + move[0], this.ty + move[1]);
    } else if (event.key === '+' || event.key === '=') {
      this.touched = true;
      this.zoomBy(1.25);
    } else if (event.key === '-') {
      this.touched = true;
      this.zoomBy(1 / 1.25);
    } else if (event.key === 'Escape') {
      this.select(null);
    }
  };
}
