/**
 * A run's steps laid over its relay's flow graph, pure: which steps ran, which were reused from
 * a checkpoint, which failed, and which the run never reached.
 *
 * Design: the side panel gets the static flow graph (`GET relay/api/relays/{name}`) and the run
 * record (`GET relay/api/runs/{id}`) separately; matching step nodes to step records by step
 * name is enough to colour the graph the way a run graph is coloured, without a kernel.
 */

import type { GraphDocument, GraphNode } from './geometry.js';
import { stepName } from './geometry.js';

/** One step record of a run, as `relay logs RUN --json` lists it. */
export interface StepRecord {
  function_id?: number;
  name: string;
  status: string;
  executed_in?: number[];
  reused_in?: number[];
  duration_ms?: number | null;
}

function latest(values: number[] | undefined): number {
  return values && values.length ? Math.max(...values) : -1;
}

/** The status of one step name across its records (several when it ran in a loop). */
export function stepStatus(records: StepRecord[], runActive: boolean): string {
  if (records.some(r => r.status === 'error')) {
    return 'failed';
  }
  if (records.some(r => r.status === 'interrupted')) {
    return runActive ? 'running' : 'failed';
  }
  const reusedLast = records.every(r => latest(r.reused_in) > latest(r.executed_in));
  return reusedLast ? 'reused' : 'succeeded';
}

/**
 * A copy of `graph` with `status`, `reused`, `count` and `attempts` set on its step nodes from
 * `steps`, and on its input and output nodes from the run's status.
 */
export function overlayRun(
  graph: GraphDocument,
  steps: StepRecord[],
  runStatus: string
): GraphDocument {
  const byName = new Map<string, StepRecord[]>();
  for (const record of steps) {
    const list = byName.get(record.name) ?? [];
    list.push(record);
    byName.set(record.name, list);
  }
  const active = runStatus === 'running' || runStatus === 'pending';
  const nodes = graph.nodes.map((node): GraphNode => {
    const copy: GraphNode = { ...node };
    if (node.type === 'step') {
      const records = byName.get(stepName(node));
      if (records) {
        const attempts = new Set<number>();
        for (const r of records) {
          for (const a of [...(r.executed_in ?? []), ...(r.reused_in ?? [])]) {
            attempts.add(a);
          }
        }
        copy.status = stepStatus(records, active);
        copy.reused = records.some(r => (r.reused_in ?? []).length > 0);
        copy.count = records.length;
        copy.attempts = [...attempts].sort((a, b) => a - b);
      } else {
        copy.status = active ? 'pending' : 'not_reached';
      }
    } else if (node.type === 'input') {
      copy.status = 'succeeded';
    } else if (node.type === 'output') {
      copy.status =
        runStatus === 'succeeded' ? 'succeeded' : runStatus === 'failed' ? 'failed' : 'pending';
    }
    return copy;
  });
  return { ...graph, kind: 'run', nodes };
}
