// Unit tests of the pure graph geometry (lib/geometry.js), run with `jlpm test`.
import assert from 'node:assert/strict';
import test from 'node:test';

import {
  curve,
  edgePoints,
  firstStep,
  fitLabel,
  graphSize,
  isLaidOut,
  labelAnchor,
  nodeSize,
  pathData,
  roundHalfEven
} from '../lib/geometry.js';

test('node boxes have the sizes the Python layout gives them', () => {
  assert.deepEqual(nodeSize('step', 'a'), [88, 40]);
  // 15 chars * 7.5 = 112.5 rounds to even (112), as Python's round() does
  assert.deepEqual(nodeSize('step', 'extract_invoice'), [140, 40]);
  assert.deepEqual(nodeSize('decision', 'invoice["amount"] > 1000'), [232, 40]);
  assert.deepEqual(nodeSize('step', 'x'.repeat(60)), [246, 40]);
  assert.deepEqual(nodeSize('decision', 'y'.repeat(40)), [247, 40]);
});

test('long labels are cut with an ellipsis and whitespace is collapsed', () => {
  assert.equal(fitLabel('x'.repeat(60), 'step'), 'x'.repeat(28) + '…');
  assert.equal(fitLabel('  two   words ', 'agent'), 'two words');
});

test('halves round to the even neighbour', () => {
  assert.deepEqual([0.5, 1.5, 2.5, 112.5, 2.4, 2.6].map(roundHalfEven), [0, 2, 2, 112, 2, 3]);
});

test('an edge without waypoints runs from the bottom of its source to the top of its target', () => {
  const a = { id: 'a', type: 'step', label: 'a', x: 100, y: 44 };
  const b = { id: 'b', type: 'step', label: 'b', x: 100, y: 144 };
  const points = edgePoints({ from: 'a', to: 'b' }, a, b);
  assert.deepEqual(points, [
    [100, 64],
    [100, 124]
  ]);
  assert.equal(pathData(points[0], curve(points, a, b)), 'M100,64 C100,94 100,94 100,124');
});

test('an edge leaving from a node side starts with a horizontal tangent', () => {
  const a = { id: 'a', type: 'step', label: 'a', x: 100, y: 100 };
  const b = { id: 'b', type: 'step', label: 'b', x: 100, y: 0 };
  const points = [
    [144, 100],
    [180, 50],
    [144, 0]
  ];
  const segments = curve(points, a, b);
  assert.equal(segments.length, 2);
  // leaves rightwards: the first control point is level with the start
  assert.equal(segments[0][0][1], 100);
  assert.ok(segments[0][0][0] > 144);
  const [x, y] = labelAnchor(points[0], segments[0]);
  assert.ok(x > 144 && x < 180 && y > 50 && y < 104);
});

test('the drawing size comes from the layout, else from the node extent', () => {
  assert.deepEqual(graphSize({ nodes: [], edges: [], layout: { width: 404, height: 488 } }), [
    404, 488
  ]);
  const doc = { nodes: [{ id: 'a', type: 'step', label: 'a', x: 300, y: 100 }], edges: [] };
  assert.deepEqual(graphSize(doc), [368, 144]);
  assert.ok(isLaidOut(doc));
  assert.ok(!isLaidOut({ nodes: [{ id: 'a', type: 'step', label: 'a' }], edges: [] }));
});

test('the first step is the topmost, then leftmost, step node', () => {
  const doc = {
    nodes: [
      { id: 'input', type: 'input', label: 'input', x: 100, y: 10 },
      { id: 's2', type: 'step', label: 'two', x: 50, y: 200 },
      { id: 's1', type: 'step', label: 'one', x: 150, y: 100, details: { name: 'first' } }
    ],
    edges: []
  };
  assert.equal(firstStep(doc).id, 's1');
  assert.equal(firstStep({ nodes: [], edges: [] }), null);
});
