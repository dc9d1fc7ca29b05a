/**
 * Drawing a relay-graph/v1 document as SVG elements, the way relay_notebook/views/svg.py writes
 * it: the same shapes, colours, captions, curves, arrowheads, status overlay and reused badges.
 *
 * Shared by the MIME renderer, the side panel and anything else that shows a graph, so a live
 * view and a saved output look the same.
 */

import {
  GraphDocument,
  GraphEdge,
  GraphNode,
  describeGraph,
  edgePoints,
  fitLabel,
  graphSize,
  labelAnchor,
  nodeSize,
  num,
  pathData,
  curve,
  polygonPoints
} from './geometry.js';
import { EDGE_COLOUR, EDGE_LABEL_COLOUR, REUSED_COLOUR, STOP_BADGES, nodeLook, stopMark } from './palette.js';

const SVG_NS = 'http://www.w3.org/2000/svg';
export const FONT =
  "system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif";
const CAPTIONLESS = new Set(['input', 'output', 'decision']);
const MAX_EDGE_LABEL = 32;

let markerCount = 0;

/** A drawn graph: the `<svg>`, the group that pans and zooms, and each node's group by id. */
export interface DrawnGraph {
  svg: SVGSVGElement;
  viewport: SVGGElement;
  width: number;
  height: number;
  nodes: Map<string, SVGGElement>;
}

type Attrs = Record<string, string | number | null | undefined>;

function el<K extends keyof SVGElementTagNameMap>(
  doc: Document,
  tag: K,
  attrs: Attrs = {},
  parent?: Element
): SVGElementTagNameMap[K] {
  const node = doc.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value !== null && value !== undefined) {
      node.setAttribute(key, typeof value === 'number' ? num(value) : value);
    }
  }
  if (parent) {
    parent.appendChild(node);
  }
  return node;
}

function text(
  doc: Document,
  parent: Element,
  content: string,
  attrs: Attrs
): SVGTextElement {
  const node = el(doc, 'text', attrs, parent);
  node.textContent = content;
  return node;
}

/** The tooltip of a node: type and line, label, then one line per detail. */
export function tooltip(node: GraphNode): string {
  const head = node.type + (node.line !== undefined ? ` · line ${node.line}` : '');
  const lines = [head, node.label];
  const details = { ...(node.details ?? {}) };
  delete details['calls']; // per-call facts (with timings) are in the details panel
  if ('reason' in details) {
    lines.push(`reason: ${String(details['reason'])}`);
    delete details['reason'];
  }
  for (const key of Object.keys(details).sort()) {
    const value = details[key];
    const raw = typeof value === 'string' ? value : JSON.stringify(value);
    const flat = String(raw).split(/\s+/).filter(Boolean).join(' ');
    lines.push(`${key}: ${flat.length <= 80 ? flat : flat.slice(0, 79) + '…'}`);
  }
  return lines.join('\n');
}

function drawShape(
  doc: Document,
  parent: Element,
  node: GraphNode,
  x0: number,
  y0: number,
  w: number,
  h: number,
  paintAttrs: Attrs,
  ink: string
): void {
  const polygon = polygonPoints(node.type, x0, y0, w, h);
  if (polygon) {
    el(
      doc,
      'polygon',
      {
        points: polygon.map(([x, y]) => `${num(x)},${num(y)}`).join(' '),
        'stroke-linejoin': 'round',
        ...paintAttrs
      },
      parent
    );
    return;
  }
  const rx = node.type === 'input' || node.type === 'output' ? h / 2 : 7;
  el(doc, 'rect', { x: x0, y: y0, width: w, height: h, rx, ...paintAttrs }, parent);
  const x1 = x0 + w;
  const y1 = y0 + h;
  if (node.type === 'workflow') {
    el(
      doc,
      'rect',
      {
        x: x0 + 3.5,
        y: y0 + 3.5,
        width: w - 7,
        height: h - 7,
        rx: 4,
        fill: 'none',
        stroke: ink,
        'stroke-width': 1
      },
      parent
    );
  } else if (node.type === 'parallel') {
    for (const yy of [y0 + 4, y1 - 4]) {
      el(
        doc,
        'line',
        {
          x1: x0 + 10,
          y1: yy,
          x2: x1 - 10,
          y2: yy,
          stroke: ink,
          'stroke-width': 2,
          'stroke-linecap': 'round'
        },
        parent
      );
    }
  } else if (node.type === 'try') {
    el(
      doc,
      'path',
      {
        d: `M${num(x0 + 7)},${num(y0 + 6)} v${num(h - 12)}`,
        stroke: ink,
        'stroke-width': 3,
        'stroke-linecap': 'round',
        fill: 'none'
      },
      parent
    );
  }
}

/** The caption over a node's label: its type and line (`STEP · L35`), as views/svg.py has it. */
export function caption(node: GraphNode): string {
  // a datasource transaction is a step that commits with its checkpoint
  const kind = node.details?.['transaction'] ? 'TRANSACTION' : node.type.toUpperCase();
  return node.line !== undefined && node.line !== null ? `${kind} · L${node.line}` : kind;
}

/** The reused badge's text: `reused`, or `2 of 3 reused` for a node of several calls. */
export function reusedBadgeText(node: GraphNode): string {
  const stop = stopMark(node);
  if (stop !== null) {
    return STOP_BADGES[stop]![0];
  }
  const summary = node.details?.['summary'];
  if (typeof summary === 'string' && (summary.endsWith('reused') || summary.includes('copied from'))) {
    return summary;
  }
  return 'reused';
}

/** Purple for reused checkpoints, teal for a fork's copied ones (views/svg.py badge_colour). */
export function badgeColour(node: GraphNode): string {
  const stop = stopMark(node);
  if (stop !== null) {
    return STOP_BADGES[stop]![1];
  }
  return node.details?.['copied_from'] ? '#0e7490' : REUSED_COLOUR;
}

/** The badge's width for its text (views/svg.py badge_width). */
export function badgeWidth(label: string): number {
  return label === 'reused' ? 42 : Math.round((label.length * 5.6 + 10) * 10) / 10;
}

/** The guarantee tag's colour by kind (source/guarantees.py); red once a body ran again. */
export const GUARANTEE_COLOURS: Record<string, string> = {
  at_least_once: '#475569',
  recorded_once: '#1d4ed8',
  uncertain: '#b45309',
  replay_safe: '#15803d',
  journaled: '#0f766e'
};
export const RAN_AGAIN_COLOUR = '#b91c1c';

/** The guarantee tag's text and colour, as views/svg.py guarantee_tag has them. */
export function guaranteeTag(node: GraphNode): [string, string, string] | null {
  const found = node.details?.['guarantee'] as
    | { kind?: string; badge?: string; ran_again?: unknown }
    | undefined;
  const kind = found?.kind;
  if (!found || typeof kind !== 'string' || !(kind in GUARANTEE_COLOURS)) {
    return null;
  }
  const text = String(found.badge ?? '');
  const again = found.ran_again;
  if (Array.isArray(again) && again.length) {
    return [`${text} · ran again ×${again.length}`, RAN_AGAIN_COLOUR, kind];
  }
  return [text, GUARANTEE_COLOURS[kind] ?? '#475569', kind];
}

/** The tag's width for its text (views/svg.py tag_width). */
export function tagWidth(text: string): number {
  return Math.round((text.length * 5 + 8) * 10) / 10;
}

/** One node's `<g>`: shape, caption, label, reused badge and guarantee tag. */
export function drawNode(doc: Document, node: GraphNode): SVGGElement {
  const [w, h] = nodeSize(node.type, node.label);
  const cx = node.x ?? 0;
  const cy = node.y ?? 0;
  const x0 = cx - w / 2;
  const y0 = cy - h / 2;
  const look = nodeLook(node);
  let classes = `relay-node relay-node--${node.type}`;
  if (look.status) {
    classes += ` relay-node--status-${look.status}`;
  }
  const g = el(doc, 'g', {
    class: classes,
    'data-node-id': node.id,
    'data-line': node.line,
    opacity: look.opacity
  });
  el(doc, 'title', {}, g).textContent = tooltip(node);
  const paintAttrs: Attrs = {
    fill: look.paint.fill,
    stroke: look.paint.stroke,
    'stroke-width': look.strokeWidth,
    'stroke-dasharray': look.dash
  };
  // views/svg.py draws the inner strokes of workflow/parallel/try in the *type* stroke colour
  drawShape(doc, g, node, x0, y0, w, h, paintAttrs, look.paint.stroke);
  const label = fitLabel(node.label, node.type);
  const italic = node.type === 'unresolved' ? 'italic' : null;
  if (CAPTIONLESS.has(node.type)) {
    text(doc, g, label, {
      x: cx,
      y: cy + 4.5,
      'text-anchor': 'middle',
      'font-size': 13,
      'font-weight': '500',
      fill: look.paint.ink,
      'font-style': italic
    });
  } else {
    text(doc, g, caption(node), {
      x: cx,
      y: y0 + 13,
      'text-anchor': 'middle',
      'font-size': 8.5,
      'letter-spacing': 0.6,
      fill: look.paint.stroke,
      'font-weight': '600'
    });
    text(doc, g, label, {
      x: cx,
      y: y0 + 29,
      'text-anchor': 'middle',
      'font-size': 13,
      fill: look.paint.ink,
      'font-style': italic
    });
  }
  const stop = stopMark(node);
  if (look.reused || stop !== null) {
    const label = reusedBadgeText(node);
    const bw = badgeWidth(label);
    const bx = x0 + w - bw + 12;
    const by = y0 - 12;
    const badge = el(doc, 'g', { class: `relay-badge relay-badge--${stop ?? 'reused'}` }, g);
    el(doc, 'rect', { x: bx, y: by, width: bw, height: 16, rx: 8, fill: badgeColour(node) }, badge);
    text(doc, badge, label, {
      x: bx + bw / 2,
      y: by + 11.5,
      'text-anchor': 'middle',
      'font-size': 9.5,
      'font-weight': '600',
      fill: '#ffffff'
    });
  }
  const tag = guaranteeTag(node);
  if (tag !== null) {
    const tw = tagWidth(tag[0]);
    const tx = x0 - 6;
    const ty = y0 + h - 7;
    const group = el(doc, 'g', { class: `relay-guarantee relay-guarantee--${tag[2]}` }, g);
    el(doc, 'rect', { x: tx, y: ty, width: tw, height: 13, rx: 6.5, fill: tag[1] }, group);
    text(doc, group, tag[0], {
      x: tx + tw / 2,
      y: ty + 9.5,
      'text-anchor': 'middle',
      'font-size': 8.5,
      'font-weight': '600',
      fill: '#ffffff'
    });
  }
  return g;
}

/** One edge's `<g>`: a curve through its waypoints with an arrowhead, and its label. */
export function drawEdge(
  doc: Document,
  edge: GraphEdge,
  source: GraphNode,
  target: GraphNode,
  markerId: string
): SVGGElement {
  const points = edgePoints(edge, source, target);
  const segments = curve(points, source, target);
  let classes = 'relay-edge';
  let dash: string | null = null;
  if ((target.y ?? 0) <= (source.y ?? 0)) {
    classes = 'relay-edge relay-edge--back';
    dash = '5 4';
  } else if (target.details?.['in_step'] === source.id) {
    classes = 'relay-edge relay-edge--attached';
    dash = '2 3';
  }
  if (edge.taken) {
    classes += ' relay-edge--taken';
  }
  const g = el(doc, 'g', { class: classes, 'data-from': edge.from, 'data-to': edge.to });
  el(
    doc,
    'path',
    {
      d: pathData(points[0]!, segments),
      fill: 'none',
      stroke: EDGE_COLOUR,
      'stroke-width': edge.taken ? 2.5 : 1.5,
      'stroke-dasharray': dash,
      'marker-end': `url(#${markerId})`
    },
    g
  );
  if (edge.label && segments.length) {
    const flat = edge.label.split(/\s+/).filter(Boolean).join(' ');
    const short = flat.length <= MAX_EDGE_LABEL ? flat : flat.slice(0, MAX_EDGE_LABEL - 1) + '…';
    const first = segments[0]!;
    let [lx, ly] = labelAnchor(points[0]!, first);
    const run = first[2][0] - points[0]![0];
    const anchor = run < -4 ? 'end' : 'start';
    lx += anchor === 'end' ? -5 : 5;
    const label = text(doc, g, '', {
      class: 'relay-edge-label',
      x: lx,
      y: ly,
      'text-anchor': anchor,
      'font-size': 11,
      fill: EDGE_LABEL_COLOUR,
      stroke: '#ffffff',
      'stroke-width': 4,
      'stroke-linejoin': 'round',
      'paint-order': 'stroke'
    });
    el(doc, 'title', {}, label).textContent = flat;
    label.appendChild(doc.createTextNode(short));
  }
  return g;
}

/** The whole graph as an `<svg>` at its natural size; positions must already be in `graph`. */
export function drawGraph(graph: GraphDocument, doc: Document = document): DrawnGraph {
  const [width, height] = graphSize(graph);
  const markerId = `relay-arrow-${++markerCount}`;
  const svg = el(doc, 'svg', {
    class: 'relay-graph',
    width,
    height,
    viewBox: `0 0 ${num(width)} ${num(height)}`,
    role: 'img',
    'aria-label': describeGraph(graph)
  });
  el(doc, 'title', {}, svg).textContent = describeGraph(graph);
  const defs = el(doc, 'defs', {}, svg);
  const marker = el(
    doc,
    'marker',
    {
      id: markerId,
      viewBox: '0 0 10 10',
      refX: 9,
      refY: 5,
      markerWidth: 6,
      markerHeight: 6,
      orient: 'auto-start-reverse'
    },
    defs
  );
  el(doc, 'path', { d: 'M0,1 L10,5 L0,9 z', fill: EDGE_COLOUR }, marker);
  el(doc, 'rect', { class: 'relay-background', width: '100%', height: '100%', fill: '#ffffff' }, svg);
  const viewport = el(doc, 'g', { class: 'relay-viewport', 'font-family': FONT }, svg);
  if (!graph.nodes.length) {
    text(doc, viewport, 'empty graph', {
      x: Math.floor(width / 2),
      y: 36,
      'text-anchor': 'middle',
      'font-size': 13,
      fill: '#64748b'
    });
  }
  // the first node with an id wins, as in views/svg.py
  const byId = new Map<string, GraphNode>();
  for (const node of graph.nodes) {
    if (!byId.has(node.id)) {
      byId.set(node.id, node);
    }
  }
  const edges = el(doc, 'g', { class: 'relay-edges' }, viewport);
  for (const edge of graph.edges) {
    const source = byId.get(edge.from);
    const target = byId.get(edge.to);
    if (source && target) {
      edges.appendChild(drawEdge(doc, edge, source, target, markerId));
    }
  }
  const group = el(doc, 'g', { class: 'relay-nodes' }, viewport);
  const nodes = new Map<string, SVGGElement>();
  for (const node of graph.nodes) {
    const g = drawNode(doc, node);
    group.appendChild(g);
    if (!nodes.has(node.id)) {
      nodes.set(node.id, g);
    }
  }
  return { svg, viewport, width, height, nodes };
}
