/**
 * Colours, pure: node types and run statuses painted as relay_notebook/views/svg.py paints them,
 * and the badge colours of run statuses in the run-history table.
 */

import type { GraphNode } from './geometry.js';

/** Fill, stroke and text colour of one kind of node. */
export interface Paint {
  fill: string;
  stroke: string;
  ink: string;
}

function paint(fill: string, stroke: string, ink: string): Paint {
  return { fill, stroke, ink };
}

/** Per node type (views/svg.py TYPE_COLOURS). */
export const TYPE_COLOURS: Readonly<Record<string, Paint>> = {
  input: paint('#ecfdf5', '#34d399', '#064e3b'),
  output: paint('#f1f5f9', '#64748b', '#0f172a'),
  step: paint('#eff6ff', '#60a5fa', '#1e3a8a'),
  workflow: paint('#eef2ff', '#818cf8', '#312e81'),
  agent: paint('#f5f3ff', '#a78bfa', '#4c1d95'),
  mcp: paint('#f0fdfa', '#2dd4bf', '#134e4a'),
  tool: paint('#ecfeff', '#22d3ee', '#164e63'),
  vault: paint('#fffbeb', '#fbbf24', '#78350f'),
  admit: paint('#fff7ed', '#fb923c', '#7c2d12'),
  decision: paint('#fefce8', '#eab308', '#713f12'),
  loop: paint('#f0f9ff', '#38bdf8', '#0c4a6e'),
  parallel: paint('#fdf4ff', '#e879f9', '#701a75'),
  try: paint('#f8fafc', '#64748b', '#334155'),
  unresolved: paint('#f8fafc', '#94a3b8', '#475569'),
  script: paint('#f9fafb', '#9ca3af', '#111827'),
  sleep: paint('#f8fafc', '#94a3b8', '#1e293b'),
  wait: paint('#fff1f2', '#fb7185', '#881337'),
  send: paint('#eef2ff', '#6366f1', '#312e81'),
  event: paint('#f0fdf4', '#4ade80', '#14532d'),
  stream: paint('#ecfeff', '#06b6d4', '#164e63')
};

/** Per node status in a run graph (views/svg.py STATUS_COLOURS). */
export const STATUS_COLOURS: Readonly<Record<string, Paint>> = {
  pending: paint('#f8fafc', '#94a3b8', '#334155'),
  running: paint('#eff6ff', '#2563eb', '#1e3a8a'),
  succeeded: paint('#f0fdf4', '#16a34a', '#14532d'),
  failed: paint('#fef2f2', '#dc2626', '#7f1d1d'),
  reused: paint('#f5f3ff', '#7c3aed', '#4c1d95'),
  copied: paint('#ecfeff', '#0e7490', '#164e63'),
  skipped: paint('#f9fafb', '#d1d5db', '#6b7280'),
  not_reached: paint('#ffffff', '#e5e7eb', '#9ca3af'),
  // blocked in DBOS.recv / DBOS.sleep: not failed, not running
  waiting: paint('#fefce8', '#ca8a04', '#713f12'),
  // the call running when its process died (its body runs again on recovery)
  interrupted: paint('#fff7ed', '#ea580c', '#7c2d12'),
  // a platform call left without its result: a person settles it (%relay reconcile)
  uncertain: paint('#fffbeb', '#d97706', '#78350f')
};

export const EDGE_COLOUR = '#94a3b8';
export const EDGE_LABEL_COLOUR = '#475569';
export const REUSED_COLOUR = '#7c3aed';
/** The badge of a node the run waits in (views/svg.py WAITING_COLOUR). */
export const WAITING_COLOUR = '#a16207';

/** The badge of a node where the run waits or stopped: text and colour (views/svg.py STOP_BADGES). */
export const STOP_BADGES: Readonly<Record<string, readonly [string, string]>> = {
  waiting: ['waiting', WAITING_COLOUR],
  interrupted: ['stopped here', '#c2410c'],
  uncertain: ['uncertain', '#b45309'],
  raised: ['raised here', '#b91c1c']
};

/** Statuses drawn with a heavier outline: where the run is, or where it stopped. */
const HEAVY = new Set(['running', 'failed', 'waiting', 'interrupted', 'uncertain']);

/** Where the run waits or stopped, if at `node`: a key of STOP_BADGES (views/svg.py stop_mark). */
export function stopMark(node: GraphNode): string | null {
  const stopped = node.details?.['stopped'];
  if (typeof stopped === 'string' && stopped in STOP_BADGES) {
    return stopped;
  }
  return nodeStatus(node) === 'waiting' ? 'waiting' : null;
}

/** How a node is painted: its status overlay wins over its type. */
export interface NodeLook {
  paint: Paint;
  status: string | null;
  reused: boolean;
  count: number | null;
  strokeWidth: number;
  dash: string | null;
  opacity: number | null;
}

/** The node's run status: the top-level overlay field, else `details.status`; null if none. */
export function nodeStatus(node: GraphNode): string | null {
  const status = node.status ?? node.details?.['status'];
  return typeof status === 'string' && status in STATUS_COLOURS ? status : null;
}

/** Whether the node's result came from a checkpoint (`reused`, top-level or in details). */
export function isReused(node: GraphNode): boolean {
  return (
    Boolean(node.reused ?? node.details?.['reused']) ||
    nodeStatus(node) === 'reused' ||
    Boolean(node.details?.['copied_from'])
  );
}

/** How many times the node ran, when the overlay says so. */
export function runCount(node: GraphNode): number | null {
  const count = node.count ?? node.details?.['count'];
  return typeof count === 'number' && Number.isFinite(count) ? count : null;
}

/** Colours, stroke and dash of a node, following views/svg.py. */
export function nodeLook(node: GraphNode): NodeLook {
  const status = nodeStatus(node);
  let look: Paint = TYPE_COLOURS[node.type] ?? TYPE_COLOURS['script']!;
  let strokeWidth = 1.5;
  let dash: string | null = null;
  let opacity: number | null = null;
  if (status !== null) {
    look = STATUS_COLOURS[status]!;
    strokeWidth = HEAVY.has(status) ? 2.5 : 2;
    if (status === 'not_reached') {
      opacity = 0.6;
      dash = '4 3';
    }
  }
  if (node.type === 'unresolved') {
    dash = '5 4';
  }
  return {
    paint: look,
    status,
    reused: isReused(node),
    count: runCount(node),
    strokeWidth,
    dash,
    opacity
  };
}

/** Badge colours of run statuses: solid, white text, as views/mime.py's HTML table has them. */
export const RUN_STATUS_COLOURS: Readonly<Record<string, string>> = {
  succeeded: '#15803d',
  failed: '#b91c1c',
  interrupted: '#b45309',
  needs_reconciliation: '#7c3aed',
  denied: '#991b1b',
  running: '#2563eb',
  pending: '#64748b',
  queued: '#64748b',
  waiting: '#a16207',
  // cancelled with DBOS's own tool (`dbos workflow cancel`): slate, not the pending grey
  cancelled: '#475569'
};

/** A run status's badge colours; unknown statuses get the pending grey. */
export function runStatusPaint(status: string): Paint {
  const colour = RUN_STATUS_COLOURS[status] ?? '#64748b';
  return paint(colour, colour, '#ffffff');
}

/** Whether a run with this status may still change (the side panel keeps polling). */
export function isActiveRunStatus(status: string): boolean {
  return status === 'running' || status === 'pending';
}
