// Unit tests of colours, formatting and the run overlay (pure modules in lib/).
import assert from 'node:assert/strict';
import test from 'node:test';

import { crashText, formatDuration, nodeFacts, readRuns, runDuration, statusText } from '../lib/format.js';
import { answerMessage, crashTargets, recoverRefusal, runFacts, runReason } from '../lib/header.js';
import {
  isActiveRunStatus,
  nodeLook,
  runStatusPaint,
  STATUS_COLOURS,
  STOP_BADGES,
  stopMark,
  TYPE_COLOURS
} from '../lib/palette.js';
import { badgeColour, caption, reusedBadgeText } from '../lib/draw.js';
import { closeQuietly } from '../lib/kernel.js';

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
  // a run cancelled with DBOS's own tool: slate, as views/mime.py's table paints it
  assert.equal(runStatusPaint('cancelled').fill, '#475569');
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

test("a model call's row in node details says its tokens, cost and what it did not pay", () => {
  const tokens = 'offline-gpt · 40 in + 8 out tokens, 0.000144 USD; not paid again in attempt 2';
  const { facts } = nodeFacts({
    id: 'agent-clerk',
    type: 'agent',
    label: 'clerk',
    details: { calls: [{ occurrence: 1, status: 'reused', duration_ms: 12, tokens }] }
  });
  assert.deepEqual(facts.find(([k]) => k === 'call #1'), ['call #1', `reused · 12 ms · ${tokens}`]);
});

test('the run header says the attempt of the budget, the counts and why the run stopped', () => {
  const run = { run_id: 'order-3', status: 'failed', attempt: 1, attempts_max: 3, executed: 2,
    error: { code: 'relay-raised', message: 'ValueError: order has no items', line: 29 } };
  assert.equal(runFacts(run), 'attempt 1 of 3 · 2 executed');
  assert.equal(runReason(run), 'ValueError: order has no items (relay.py line 29)');
  assert.equal(runFacts({ run_id: 'x', attempt: 2, attempts_max: 3, executed: 2, reused: 3 }),
    'attempt 2 of 3 · 2 executed · 3 reused');
  assert.equal(runReason({ run_id: 'x', reason: 'crashed on purpose after pack#2 (--crash)' }),
    'crashed on purpose after pack#2 (--crash)');
});

test('recover applies only to an interrupted run with attempts left, and says why not', () => {
  assert.equal(recoverRefusal({ run_id: 'a', status: 'interrupted', attempt: 1, attempts_max: 3 }), '');
  assert.match(recoverRefusal({ run_id: 'a', status: 'interrupted', attempt: 3, attempts_max: 3 }),
    /All 3 attempts/);
  assert.match(recoverRefusal({ run_id: 'a', status: 'failed' }), /relay error is final/);
  assert.match(recoverRefusal({ run_id: 'a', status: 'succeeded' }), /nothing to recover/);
  assert.match(recoverRefusal({ run_id: 'a', status: 'running' }), /still going/);
  assert.match(recoverRefusal({ run_id: 'a', status: 'needs_reconciliation' }), /reconcile/);
});

test('crash targets are the step names of the flow, once each, not the calls inside steps', () => {
  const graph = { nodes: [
    { id: 'input', type: 'input', label: 'input' },
    { id: 'step-ship', type: 'step', label: 'ship', details: { name: 'ship' } },
    { id: 'step-ship-2', type: 'step', label: 'ship', details: { name: 'ship' } },
    { id: 'agent-x', type: 'agent', label: 'x', details: { in_step: 'step-ship' } },
    { id: 'step-pack', type: 'step', label: 'pack' }
  ], edges: [] };
  assert.deepEqual(crashTargets(graph), ['ship', 'pack']);
});

test('crash points read as when:step, with the occurrence past the first', () => {
  assert.equal(crashText({ when: 'after', step: 'fetch', occurrence: 1 }), 'after:fetch');
  assert.equal(crashText({ when: 'during', step: 'add', occurrence: 2 }), 'during:add#2');
  assert.equal(crashText('after:fetch'), 'after:fetch');
  assert.equal(crashText(null), '');
});

test('a waiting node is gold, never red, and a waiting run is not recoverable from the view', () => {
  const wait = { id: 'w', type: 'wait', label: 'wait for approval', details: { status: 'waiting' } };
  assert.deepEqual(nodeLook(wait).paint, STATUS_COLOURS.waiting);
  assert.notDeepEqual(STATUS_COLOURS.waiting, STATUS_COLOURS.failed);
  assert.notEqual(runStatusPaint('waiting').fill, runStatusPaint('failed').fill);
  assert.equal(isActiveRunStatus('waiting'), false);
  const run = { run_id: 'a-1', status: 'waiting', waiting: { kind: 'message', text: 'x', topic: 'approval' } };
  assert.match(recoverRefusal(run), /waiting for a message/);
});

test('approve and reject send approved with the note; send JSON sends the input', () => {
  assert.deepEqual(answerMessage('approve', ''), { approved: true });
  assert.deepEqual(answerMessage('reject', '  too much '), { approved: false, note: 'too much' });
  assert.deepEqual(answerMessage('json', '{"amount": 40}'), { amount: 40 });
  assert.equal(answerMessage('json', 'not json'), null);
});

test('where a run stopped is badged on its node, as views/svg.py badges it', () => {
  const step = { id: 's', type: 'step', label: 's' };
  const died = { ...step, status: 'interrupted', details: { status: 'interrupted', stopped: 'interrupted' } };
  assert.equal(stopMark(died), 'interrupted');
  assert.equal(reusedBadgeText(died), 'stopped here');
  assert.equal(badgeColour(died), STOP_BADGES.interrupted[1]);
  assert.equal(nodeLook(died).strokeWidth, 2.5);
  const raised = { ...step, details: { status: 'failed', stopped: 'raised' } };
  assert.equal(reusedBadgeText(raised), 'raised here');
  const uncertain = { ...step, type: 'agent', details: { status: 'uncertain', stopped: 'uncertain' } };
  assert.deepEqual(nodeLook(uncertain).paint, STATUS_COLOURS.uncertain);
  assert.equal(reusedBadgeText(uncertain), 'uncertain');
  assert.equal(stopMark({ ...step, details: { status: 'waiting' } }), 'waiting');
  assert.equal(stopMark({ ...step, details: { status: 'succeeded' } }), null);
});

test('closing a comm the kernel already closed does not throw', () => {
  const closed = {
    close() {
      throw new Error('Cannot close');
    }
  };
  assert.doesNotThrow(() => closeQuietly(closed));
  assert.doesNotThrow(() => closeQuietly(null));
});

test("a run's duration is the time its attempts ran, with the wall time beside after a recovery", () => {
  // crashed from the side panel, recovered minutes later: 3.7 s + 1.1 s of attempts
  const recovered = { run_id: 'r-1', status: 'succeeded', attempts: 2, active_ms: 4800, duration_ms: 273000 };
  assert.equal(runDuration(recovered), '4.8 s (4 min 33 s wall)');
  assert.equal(runDuration({ ...recovered, attempts: 1, duration_ms: 4900 }), '4.8 s');
  // a row without active time (an older server) keeps the wall time; before any end, a dash
  assert.equal(runDuration({ run_id: 'r-2', status: 'succeeded', duration_ms: 2500 }), '2.5 s');
  assert.equal(runDuration({ run_id: 'r-3', status: 'running' }), '—');
});

test("a node's caption is its type and line; a datasource transaction's says TRANSACTION", () => {
  assert.equal(caption({ id: 's', type: 'step', label: 's', line: 7 }), 'STEP · L7');
  assert.equal(caption({ id: 'o', type: 'output', label: 'output' }), 'OUTPUT');
  const tx = { id: 't', type: 'step', label: 'greet', line: 12, details: { transaction: 'ds' } };
  assert.equal(caption(tx), 'TRANSACTION · L12');
});
