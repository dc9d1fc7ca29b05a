/**
 * The run-history table in plain DOM: one row per run with a status badge, attempts, a reused
 * badge and the duration. Used by the runs MIME renderer and the side panel.
 */

import type { RunRow } from './format.js';
import { runDuration, statusText } from './format.js';
import { runStatusPaint } from './palette.js';

/** A status badge (`<span>`) coloured by run status. */
export function statusBadge(status: string): HTMLSpanElement {
  const badge = document.createElement('span');
  const look = runStatusPaint(status);
  badge.className = `jp-RelayBadge jp-RelayBadge--status jp-RelayBadge--${status}`;
  badge.textContent = statusText(status);
  badge.style.background = look.fill;
  badge.style.borderColor = look.stroke;
  badge.style.color = look.ink;
  return badge;
}

/** A purple "N reused" badge, or an empty span when nothing was reused. */
export function reusedBadge(count: number | undefined): HTMLSpanElement {
  const badge = document.createElement('span');
  if (count && count > 0) {
    badge.className = 'jp-RelayBadge jp-RelayBadge--reused';
    badge.textContent = `${count} reused`;
    badge.title = `${count} step result${count === 1 ? '' : 's'} came from checkpoints`;
  }
  return badge;
}

export interface RunTableOptions {
  /** Show the relay column (off when every run is of one relay). */
  showRelay?: boolean;
  /** Called when a row is clicked; rows look clickable only when given. */
  onOpen?: (run: RunRow) => void;
  /** The run id whose row is highlighted. */
  selected?: string | null;
}

/** Make `node` (a run's row or item) open `run` on a click or Enter, when the options say what
 * opening is; highlight it when it is the selected run. */
function markRun(node: HTMLElement, run: RunRow, options: RunTableOptions): void {
  const open = options.onOpen;
  if (open) {
    node.classList.add('jp-mod-clickable');
    node.tabIndex = 0;
    node.title = `Open run ${run.run_id}`;
    node.addEventListener('click', () => open(run));
    node.addEventListener('keydown', event => {
      if (event.key === 'Enter') {
        open(run);
      }
    });
  }
  if (options.selected === run.run_id) {
    node.classList.add('jp-mod-selected');
  }
}

/** A `<table>` of `runs`, newest last as given. */
export function runTable(runs: RunRow[], options: RunTableOptions = {}): HTMLTableElement {
  const showRelay = options.showRelay ?? true;
  const table = document.createElement('table');
  table.className = 'jp-RelayRuns';
  const head = table.createTHead().insertRow();
  const columns = ['run', ...(showRelay ? ['relay'] : []), 'release', 'status', 'attempts'];
  for (const name of [...columns, 'reused', 'duration']) {
    const th = document.createElement('th');
    th.textContent = name;
    head.appendChild(th);
  }
  const body = table.createTBody();
  if (!runs.length) {
    const cell = body.insertRow().insertCell();
    cell.colSpan = columns.length + 2;
    cell.className = 'jp-RelayRuns-empty';
    cell.textContent = 'no runs yet';
  }
  for (const run of runs) {
    const row = body.insertRow();
    row.dataset['runId'] = run.run_id;
    row.dataset['status'] = run.status;
    row.insertCell().textContent = run.run_id;
    if (showRelay) {
      row.insertCell().textContent = run.relay ?? '';
    }
    row.insertCell().textContent = run.release ?? '';
    row.insertCell().appendChild(statusBadge(run.status));
    const attempts = row.insertCell();
    attempts.className = 'jp-RelayRuns-number';
    attempts.textContent = run.attempts === undefined ? '' : String(run.attempts);
    row.insertCell().appendChild(reusedBadge(run.reused));
    const duration = row.insertCell();
    duration.className = 'jp-RelayRuns-number';
    duration.textContent = runDuration(run);
    markRun(row, run, options);
  }
  return table;
}

/** A narrow list of `runs` for side panels: id and status, then attempts, reused, duration. */
export function runList(runs: RunRow[], options: RunTableOptions = {}): HTMLUListElement {
  const list = document.createElement('ul');
  list.className = 'jp-RelayRunList';
  if (!runs.length) {
    const empty = document.createElement('li');
    empty.className = 'jp-RelayRuns-empty';
    empty.textContent = 'no runs yet';
    list.appendChild(empty);
  }
  for (const run of runs) {
    const item = document.createElement('li');
    item.className = 'jp-RelayRunList-item';
    item.dataset['runId'] = run.run_id;
    item.dataset['status'] = run.status;
    const top = document.createElement('div');
    top.className = 'jp-RelayRunList-top';
    const id = document.createElement('span');
    id.className = 'jp-RelayRunList-id';
    id.textContent = run.run_id;
    top.append(id, statusBadge(run.status));
    const bottom = document.createElement('div');
    bottom.className = 'jp-RelayRunList-meta';
    const attempts = run.attempts ?? 0;
    const parts = [
      run.release ?? '',
      `${attempts} attempt${attempts === 1 ? '' : 's'}`,
      runDuration(run)
    ].filter(Boolean);
    bottom.append(parts.join(' · ') + ' ', reusedBadge(run.reused));
    item.append(top, bottom);
    markRun(item, run, options);
    list.appendChild(item);
  }
  return list;
}
