// Unit tests of colours, formatting and the run overlay (pure modules in lib/).
import assert from 'node:assert/strict';
import test from 'node:test';

import { crashText, formatDuration, nodeFacts, readRuns, statusText } from '../lib/format.js';
import { overlayRun, stepStatus } from '../lib/overlay.js';
import {
  isActiveRunStatus,
  nodeLook,
  runStatusPaint,
  STATUS_COLOURS,
  TYPE_COLOURS
} from '../lib/palette.js';

test('a node is painted by its type until a run status overrides it', () => {
  const step = { id: 's', type: 'step', label: 's' };
  assert.deepEqual(nodeLook(step).paint, TYPE_COLOURS.step);
  assert.equal(nodeLook(step).strokeWidth, 1.5);
  const failed = { ...step, details: { status: 'failed' } };
  assert.deepEqual(nodeLook(failed).paint, STATUS_COLOURS.failed);
  assert.equal(nodeLook(failed).strokeWidth, 2.5);
  // the top-level overlay field wins over details
  const ok = { ...step, status: 'succeeded', details: { status: 'failed' } };
  assert.equal(nodeLook(ok).status, 'succeeded');
  const notReached = nodeLook({ ...step, status: 'not_reached' });
  assert.equal(notReached.opacity, 0.6);
  assert.equal(notReached.dash, '4 3');
  assert.equal(nodeLook({ ...step, status: 'bogus' }).status, null);
  assert.deepEqual(nodeLook({ id: 'u', type: 'weird', label: 'u' }).paint, TYPE_COLOURS.script);
});

test('reused comes from the overlay field, details, or the reused status', () => {
  const step = { id: 's', type: 'step', label: 's' };
  assert.equal(nodeLook(step).reused, false);
  assert.equal(nodeLook({ ...step, reused: true }).reused, true);
  assert.equal(nodeLook({ ...step, details: { reused: true } }).reused, true);
  assert.equal(nodeLook({ ...step, status: 'reused' }).reused, true);
});

test('run statuses get badge colours and only pending/running runs are active', () => {
  assert.equal(runStatusPaint('succeeded').fill, '#15803d');
  assert.equal(runStatusPaint('succeeded').ink, '#ffffff');
  assert.equal(runStatusPaint('never-heard-of-it').fill, '#64748b');
  assert.ok(isActiveRunStatus('running') && isActiveRunStatus('pending'));
  assert.ok(!isActiveRunStatus('interrupted'));
  assert.equal(statusText('needs_reconciliation'), 'needs reconciliation');
});

test('durations read as ms, seconds, or minutes', () => {
  assert.equal(formatDuration(null), '—');
  assert.equal(formatDuration(undefined), '—');
  assert.equal(formatDuration(12.4), '12 ms');
  assert.equal(formatDuration(1530), '1.5 s');
  assert.equal(formatDuration(125_000), '2 min 05 s');
});

test('run rows without an id or status are dropped', () => {
  const runs = readRuns({
    runs: [{ run_id: 'a-1', status: 'succeeded' }, { status: 'failed' }, null, 'x']
  });
  assert.deepEqual(runs, [{ run_id: 'a-1', status: 'succeeded' }]);
  assert.deepEqual(readRuns({}), []);
});

test('node details list type, label, line and the overlay', () => {
  const { facts, json } = nodeFacts({
    id: 's',
    type: 'step',
    label: 'extract',
    line: 7,
    reused: true,
    details: { name: 'extract', status: 'reused' }
  });
  const names = facts.map(([k]) => k);
  assert.deepEqual(names, ['type', 'label', 'id', 'line', 'status', 'reused']);
  assert.deepEqual(JSON.parse(json), { name: 'extract', status: 'reused' });
});

test('a run overlay marks reused, executed, failed and unreached steps', () => {
  const graph = {
    kind: 'flow',
    nodes: [
      { id: 'input', type: 'input', label: 'input', x: 0, y: 0 },
      { id: 'step-a', type: 'step', label: 'a', details: { name: 'a' }, x: 0, y: 100 },
      { id: 'step-b', type: 'step', label: 'b', details: { name: 'b' }, x: 0, y: 200 },
      { id: 'step-c', type: 'step', label: 'c', details: { name: 'c' }, x: 0, y: 300 },
      { id: 'output', type: 'output', label: 'output', x: 0, y: 400 }
    ],
    edges: []
  };
  const steps = [
    { name: 'a', status: 'checkpointed', executed_in: [1], reused_in: [2] },
    { name: 'b', status: 'checkpointed', executed_in: [2], reused_in: [] },
    { name: 'b', status: 'checkpointed', executed_in: [2], reused_in: [] }
  ];
  const run = overlayRun(graph, steps, 'succeeded');
  const by = Object.fromEntries(run.nodes.map(n => [n.id, n]));
  assert.equal(run.kind, 'run');
  assert.equal(by['step-a'].status, 'reused');
  assert.equal(by['step-a'].reused, true);
  assert.deepEqual(by['step-a'].attempts, [1, 2]);
  assert.equal(by['step-b'].status, 'succeeded');
  assert.equal(by['step-b'].count, 2);
  assert.equal(by['step-c'].status, 'not_reached');
  assert.equal(by.output.status, 'succeeded');
  // the input graph is not changed
  assert.equal(graph.nodes[1].status, undefined);
  const live = overlayRun(graph, [], 'running');
  assert.equal(live.nodes[3].status, 'pending');
});

test('a step interrupted by a crash is running while the run goes, failed after', () => {
  const records = [{ name: 'a', status: 'interrupted', executed_in: [1] }];
  assert.equal(stepStatus(records, true), 'running');
  assert.equal(stepStatus(records, false), 'failed');
  assert.equal(stepStatus([{ name: 'a', status: 'error' }], false), 'failed');
});

test('crash points read as when:step, with the occurrence past the first', () => {
  assert.equal(crashText({ when: 'after', step: 'fetch', occurrence: 1 }), 'after:fetch');
  assert.equal(crashText({ when: 'during', step: 'add', occurrence: 2 }), 'during:add#2');
  assert.equal(crashText('after:fetch'), 'after:fetch');
  assert.equal(crashText(null), '');
});
