/**
 * Graph geometry, pure: node box sizes, label fitting and edge curves of a relay-graph/v1
 * document, computed exactly as relay_notebook/source/layout.py and views/svg.py do.
 *
 * Design: the Python layout puts node centres and edge waypoints in the document but not box
 * sizes (they follow from type and label length), so this module repeats the sizing rules,
 * including Python's round-half-to-even, to land edges on the same box borders as the SVG.
 * It has no imports and touches no DOM, so node's test runner loads it straight from lib/.
 */

/** Box height of every node, in px (layout.NODE_HEIGHT). */
export const NODE_HEIGHT = 40;
export const NODE_MIN_WIDTH = 88;
export const NODE_MAX_WIDTH = 248;
/** Average advance of a 13px system-ui glyph: labels are sized, not measured. */
export const CHAR_WIDTH = 7.5;
export const LABEL_PADDING = 14;
export const DECISION_EXTRA = 24;
/** Margin around a drawing whose document carries no `layout` size. */
export const MARGIN = 24;

export type Point = [number, number];
/** One cubic segment: two control points and the end point. */
export type Segment = [Point, Point, Point];

/** A node of a relay-graph/v1 document, with the run overlay fields the schema allows. */
export interface GraphNode {
  id: string;
  type: string;
  label: string;
  line?: number;
  details?: Record<string, unknown>;
  x?: number;
  y?: number;
  status?: string;
  reused?: boolean;
  count?: number;
  attempts?: number[];
}

export interface GraphEdge {
  from: string;
  to: string;
  label?: string;
  points?: Point[];
  taken?: boolean;
}

/** A relay-graph/v1 document. */
export interface GraphDocument {
  schema?: string;
  kind?: 'flow' | 'annotations' | 'run';
  relay?: string;
  nodes: GraphNode[];
  edges: GraphEdge[];
  notes?: string[];
  layout?: { width: number; height: number };
  /** On a run graph: the run it shows (history/run_summary.py). */
  run?: RunInfo;
}

/** The run a run graph shows, as its header says it. */
export interface RunInfo {
  run_id: string;
  relay?: string | null;
  status?: string | null;
  attempt?: number | null;
  attempts_max?: number;
  /** attempts counted against attempts_max (one that ended waiting is not) */
  attempts_counted?: number;
  executed?: number;
  reused?: number;
  reason?: string;
  error?: { code?: string | null; message?: string | null; line?: number };
  next?: string;
  note?: string;
  /** What the graph is drawn on when it is not the draft as it is now (the draft changed since). */
  drawn?: string;
  /** Where the drawn code came from; `draft_steps`: the steps of the draft as it is now, which
   * the header's run again and crash tests run when the draft changed since this run. */
  code?: { kind?: string; changed?: boolean; kept?: boolean; version?: number; draft_steps?: string[] };
  /** What a succeeded run returned, as one line of JSON (a live view's header shows it). */
  result?: string;
  /** `recovered from attempt 1's crash`: earlier attempts of the run were interrupted. */
  recovered?: string;
  /** the run's model calls in words: tokens and cost paid, and what reuse did not pay */
  usage?: string;
  /** Platform calls left without their result that a person must settle (%relay reconcile). */
  uncertain?: { key?: string | null; call: string; attempt?: number | null }[];
  fork?: { parent?: string; from?: string; copied?: number; edited?: string[]; input_edited?: boolean; code?: string };
  /** A waiting run: what it waits for (`text`: `waiting for a message on topic "approval"`). */
  waiting?: WaitingInfo;
  /** What the run published: each event's latest value, each stream's newest values. */
  events?: RunEventsInfo;
}

export interface WaitingInfo {
  kind: 'message' | 'sleep';
  text: string;
  topic?: string | null;
  workflow_id?: string;
  until_ms?: number | null;
  until?: string | null;
  since_ms?: number;
}

export interface RunEventsInfo {
  events?: { workflow_id?: string; key: string; preview: string; function_id?: number | null }[];
  streams?: {
    workflow_id?: string;
    key: string;
    count: number;
    closed?: boolean;
    values: { offset?: number; preview: string }[];
  }[];
}

/** Python's round(): halves go to the even neighbour. */
export function roundHalfEven(value: number): number {
  const floor = Math.floor(value);
  const diff = value - floor;
  if (diff > 0.5) {
    return floor + 1;
  }
  if (diff < 0.5) {
    return floor;
  }
  return floor % 2 === 0 ? floor : floor + 1;
}

function extraWidth(nodeType: string): number {
  return nodeType === 'decision' ? DECISION_EXTRA : 0;
}

/** Code points, as Python's len() counts them. */
function chars(text: string): string[] {
  return Array.from(text);
}

/** The label as drawn in the box: whitespace collapsed, cut with an ellipsis when too long. */
export function fitLabel(label: string, nodeType = 'step'): string {
  const room = NODE_MAX_WIDTH - 2 * LABEL_PADDING - extraWidth(nodeType);
  const capacity = Math.floor(room / CHAR_WIDTH);
  const text = label.split(/\s+/).filter(Boolean).join(' ');
  const cps = chars(text);
  if (cps.length <= capacity) {
    return text;
  }
  return (
    cps
      .slice(0, capacity - 1)
      .join('')
      .trimEnd() + '…'
  );
}

/** The `[width, height]` of a node's box, from its type and label length. */
export function nodeSize(nodeType: string, label: string): [number, number] {
  const text = fitLabel(label, nodeType);
  const width =
    roundHalfEven(chars(text).length * CHAR_WIDTH) + 2 * LABEL_PADDING + extraWidth(nodeType);
  return [Math.max(NODE_MIN_WIDTH, Math.min(NODE_MAX_WIDTH, width)), NODE_HEIGHT];
}

/** Whether `(px, py)` sits on the left or right border of `node`'s box. */
export function onSide(node: GraphNode, px: number, py: number): boolean {
  const [w, h] = nodeSize(node.type, node.label);
  const cx = node.x ?? 0;
  const cy = node.y ?? 0;
  return Math.abs(Math.abs(px - cx) - w / 2) <= 1 && Math.abs(py - cy) < h / 2;
}

/** An edge's waypoints: its own, or bottom-centre of the source to top-centre of the target. */
export function edgePoints(edge: GraphEdge, source: GraphNode, target: GraphNode): Point[] {
  const points = (edge.points ?? []).map(p => [p[0], p[1]] as Point);
  if (points.length >= 2) {
    return points;
  }
  const half = NODE_HEIGHT / 2;
  return [
    [source.x ?? 0, (source.y ?? 0) + half],
    [target.x ?? 0, (target.y ?? 0) - half]
  ];
}

/** Cubic segments through `points`: vertical tangents, horizontal ones at side ports. */
export function curve(points: Point[], source: GraphNode, target: GraphNode): Segment[] {
  const last = points.length - 1;
  const tangents: Point[] = points.map(([px, py], i) => {
    const node = i === 0 ? source : i === last ? target : null;
    if (node !== null && onSide(node, px, py)) {
      const sign = px >= (node.x ?? 0) ? 1 : -1;
      return [i === 0 ? sign : -sign, 0];
    }
    const before = points[Math.max(i - 1, 0)]![1];
    const after = points[Math.min(i + 1, last)]![1];
    return [0, after >= before ? 1 : -1];
  });
  const segments: Segment[] = [];
  for (let i = 0; i < last; i++) {
    const [ax, ay] = points[i]!;
    const [bx, by] = points[i + 1]!;
    const [tax, tay] = tangents[i]!;
    const [tbx, tby] = tangents[i + 1]!;
    const reachA = Math.max(tax ? Math.abs(bx - ax) : Math.abs(by - ay), 16) * 0.5;
    const reachB = Math.max(tbx ? Math.abs(bx - ax) : Math.abs(by - ay), 16) * 0.5;
    segments.push([
      [ax + tax * reachA, ay + tay * reachA],
      [bx - tbx * reachB, by - tby * reachB],
      [bx, by]
    ]);
  }
  return segments;
}

/** A number as the SVG writes it: integers bare, others with one decimal. */
export function num(value: number): string {
  return Number.isInteger(value) ? String(value) : value.toFixed(1);
}

/** The `d` attribute of a path starting at `start` through cubic `segments`. */
export function pathData(start: Point, segments: Segment[]): string {
  let d = `M${num(start[0])},${num(start[1])}`;
  for (const [a, b, c] of segments) {
    d += ` C${num(a[0])},${num(a[1])} ${num(b[0])},${num(b[1])} ${num(c[0])},${num(c[1])}`;
  }
  return d;
}

/** Where an edge label goes: the middle of the first segment, nudged below the line. */
export function labelAnchor(start: Point, segment: Segment): Point {
  const [[c1x, c1y], [c2x, c2y], [ex, ey]] = segment;
  const t = 0.5;
  const u = 1 - t;
  const x = u ** 3 * start[0] + 3 * u * u * t * c1x + 3 * u * t * t * c2x + t ** 3 * ex;
  const y = u ** 3 * start[1] + 3 * u * u * t * c1y + 3 * u * t * t * c2y + t ** 3 * ey;
  return [x, y + 4];
}

/** Outline points of polygon-shaped nodes (decision hexagon, loop octagon); null for boxes. */
export function polygonPoints(
  nodeType: string,
  x0: number,
  y0: number,
  w: number,
  h: number
): Point[] | null {
  const x1 = x0 + w;
  const y1 = y0 + h;
  const cy = y0 + h / 2;
  if (nodeType === 'decision') {
    return [
      [x0, cy],
      [x0 + 12, y0],
      [x1 - 12, y0],
      [x1, cy],
      [x1 - 12, y1],
      [x0 + 12, y1]
    ];
  }
  if (nodeType === 'loop') {
    const c = 9;
    return [
      [x0 + c, y0],
      [x1 - c, y0],
      [x1, y0 + c],
      [x1, y1 - c],
      [x1 - c, y1],
      [x0 + c, y1],
      [x0, y1 - c],
      [x0, y0 + c]
    ];
  }
  return null;
}

/** The drawing's size: the document's `layout`, else the nodes' extent plus a margin. */
export function graphSize(doc: GraphDocument): [number, number] {
  if (doc.layout && doc.layout.width > 0 && doc.layout.height > 0) {
    return [doc.layout.width, doc.layout.height];
  }
  let right = 0;
  let bottom = 0;
  for (const node of doc.nodes) {
    const [w, h] = nodeSize(node.type, node.label);
    right = Math.max(right, (node.x ?? 0) + w / 2);
    bottom = Math.max(bottom, (node.y ?? 0) + h / 2);
  }
  return [Math.max(Math.ceil(right) + MARGIN, 240), Math.max(Math.ceil(bottom) + MARGIN, 64)];
}

/** Whether every node carries a position (the renderer does not lay graphs out itself). */
export function isLaidOut(doc: GraphDocument): boolean {
  return doc.nodes.every(n => typeof n.x === 'number' && typeof n.y === 'number');
}

/** A short sentence naming the graph, as the SVG's title does. */
export function describeGraph(doc: GraphDocument): string {
  const name = doc.relay ? ` of ${doc.relay}` : '';
  const kind = doc.kind === 'run' ? 'run graph' : 'flow graph';
  return `${kind}${name}: ${doc.nodes.length} nodes, ${doc.edges.length} edges`;
}

/** The first step a run reaches: the topmost (then leftmost) `step` node, or null. */
export function firstStep(doc: GraphDocument): GraphNode | null {
  const steps = doc.nodes.filter(n => n.type === 'step');
  steps.sort((a, b) => (a.y ?? 0) - (b.y ?? 0) || (a.x ?? 0) - (b.x ?? 0));
  return steps[0] ?? null;
}

/** The step name a `step` node stands for: `details.name`, else its label. */
export function stepName(node: GraphNode): string {
  const name = node.details?.['name'];
  return typeof name === 'string' && name ? name : node.label;
}
