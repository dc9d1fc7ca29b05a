/**
 * Text formatting, pure: durations, run-history rows and node details as the views show them.
 */

import type { GraphNode } from './geometry.js';

/** One row of a run-history document (`application/vnd.relay.runs+json`). */
export interface RunRow {
  run_id: string;
  relay?: string;
  status: string;
  attempts?: number;
  reused?: number;
  release?: string;
  /** wall time: from the run's creation to the end of its latest attempt */
  duration_ms?: number | null;
  /** active time: the sum of its attempts' durations */
  active_ms?: number | null;
  created_at?: number;
}

/** A run-history document. */
export interface RunsDocument {
  runs: RunRow[];
  relay?: string;
}

/**
 * A run's duration as `%relay runs` and `relay runs` word it: the time its attempts ran, with
 * the wall time beside when it had more than one attempt (a run crashed, then recovered minutes
 * later, did not take those minutes); the wall time alone for a row without active time.
 */
export function runDuration(run: RunRow): string {
  const active = run.active_ms;
  if (active === null || active === undefined) {
    return formatDuration(run.duration_ms);
  }
  const wall = run.duration_ms;
  const beside = typeof wall === 'number' && (run.attempts ?? 1) > 1;
  return formatDuration(active) + (beside ? ` (${formatDuration(wall)} wall)` : '');
}

/** A duration for people: `—` when unknown, then ms, s, or min and s. */
export function formatDuration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms) || ms < 0) {
    return '—';
  }
  if (ms < 1000) {
    return `${Math.round(ms)} ms`;
  }
  if (ms < 60_000) {
    return `${(ms / 1000).toFixed(1)} s`;
  }
  const minutes = Math.floor(ms / 60_000);
  const seconds = Math.floor((ms % 60_000) / 1000);
  return `${minutes} min ${String(seconds).padStart(2, '0')} s`;
}

/** A status word for people: `needs_reconciliation` → `needs reconciliation`. */
export function statusText(status: string): string {
  return status.replace(/_/g, ' ');
}

/** A crash point for people: `after:fetch`, `during:add#2`; empty when there is none. */
export function crashText(crash: unknown): string {
  if (typeof crash === 'string') {
    return crash;
  }
  if (crash && typeof crash === 'object') {
    const { when, step, occurrence } = crash as Record<string, unknown>;
    if (typeof when === 'string' && typeof step === 'string') {
      const nth = typeof occurrence === 'number' && occurrence > 1 ? `#${occurrence}` : '';
      return `${when}:${step}${nth}`;
    }
  }
  return '';
}

/** The runs of a document, keeping only rows with a run id and a status. */
export function readRuns(data: unknown): RunRow[] {
  const runs = (data as { runs?: unknown } | null)?.runs;
  if (!Array.isArray(runs)) {
    return [];
  }
  return runs.filter(
    (r): r is RunRow =>
      typeof r === 'object' &&
      r !== null &&
      typeof (r as RunRow).run_id === 'string' &&
      typeof (r as RunRow).status === 'string'
  );
}

/** The header and facts of a node's details panel: `[name, value]` pairs, then JSON. */
export function nodeFacts(node: GraphNode): { facts: [string, string][]; json: string } {
  const facts: [string, string][] = [
    ['type', node.type],
    ['label', node.label],
    ['id', node.id]
  ];
  if (node.line !== undefined) {
    facts.push(['line', String(node.line)]);
  }
  const status = node.status ?? node.details?.['status'];
  if (typeof status === 'string') {
    facts.push(['status', statusText(status)]);
  }
  if (node.reused ?? node.details?.['reused']) {
    facts.push(['reused', 'yes: the result came from a checkpoint']);
  }
  if (typeof node.count === 'number') {
    facts.push(['runs', String(node.count)]);
  }
  if (Array.isArray(node.attempts) && node.attempts.length) {
    facts.push(['attempts', node.attempts.join(', ')]);
  }
  const d = node.details ?? {};
  const list = (key: string): number[] =>
    Array.isArray(d[key]) ? (d[key] as unknown[]).filter((n): n is number => typeof n === 'number') : [];
  if (list('executed_in').length) {
    facts.push(['executed in', `attempt ${list('executed_in').join(', ')}`]);
  }
  if (list('reused_in').length) {
    facts.push(['reused in', `attempt ${list('reused_in').join(', ')}`]);
  }
  if (typeof d['summary'] === 'string') {
    facts.push(['calls', d['summary']]);
  }
  const guarantee = d['guarantee'] as
    | { text?: string; retries?: string; hint?: string; ran_again?: string[] }
    | undefined;
  if (guarantee && typeof guarantee.text === 'string') {
    facts.push(['guarantee', guarantee.text]);
    if (guarantee.retries) {
      facts.push(['retries', guarantee.retries]);
    }
    if (Array.isArray(guarantee.ran_again) && guarantee.ran_again.length) {
      facts.push(['ran again', `${guarantee.ran_again.join(', ')}: the body ran in more than one attempt`]);
    }
    if (guarantee.hint) {
      facts.push(['hint', guarantee.hint]);
    }
  }
    const error = d['error'] as { message?: string; line?: number } | undefined;
  if (error && typeof error.message === 'string') {
    facts.push(['error', error.line ? `${error.message} (relay.py line ${error.line})` : error.message]);
  }
  const calls = Array.isArray(d['calls']) ? (d['calls'] as Record<string, unknown>[]) : [];
  calls.forEach((call, i) => {
    if (typeof call['hidden'] === 'number') {
      facts.push(['…', `${call['hidden']} more calls`]);
      return;
    }
    const bits: string[] = [];
    if (typeof call['status'] === 'string') bits.push(call['status']);
    if (typeof call['duration_ms'] === 'number') bits.push(formatDuration(call['duration_ms']));
    for (const key of ['input_preview', 'output_preview', 'error_preview']) {
      if (typeof call[key] === 'string') {
        bits.push(`${key.replace('_preview', '')} ${call[key]}`);
      }
    }
    if (typeof call['tokens'] === 'string') {
      bits.push(call['tokens']); // a model call's tokens and cost, and what it did not pay
    }
    facts.push([`call ${typeof call['occurrence'] === 'number' ? `#${call['occurrence']}` : i + 1}`, bits.join(' · ')]);
  });
  const json = JSON.stringify(node.details ?? {}, null, 2);
  return { facts, json };
}
