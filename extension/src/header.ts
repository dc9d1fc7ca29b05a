/**
 * The header of a run view: which run, its status, the attempt of the budget, what ran and was
 * reused, why it stopped, what to type next, and the buttons that act on it (run again, crash
 * after or during a chosen step, recover). Buttons that cannot apply are disabled and say why.
 */

import type { GraphDocument, RunEventsInfo, RunInfo } from './geometry.js';
import { h, picker } from './dom.js';
import { statusText } from './format.js';
import { statusBadge } from './runtable.js';

/** What a button asks the kernel for. */
export interface ViewAction {
  action: 'run' | 'recover' | 'fork' | 'send';
  run_id: string;
  crash?: string;
  /** For a send: the topic the run waits on, and the message (any JSON value). */
  topic?: string;
  message?: unknown;
  /** For a fork: the call it starts from (`STEP#N`), and whether it runs the current draft. */
  from?: string;
  draft?: boolean;
}

/** The step names a crash can be aimed at, in graph order (each name once). */
export function crashTargets(graph: GraphDocument): string[] {
  const names: string[] = [];
  for (const node of graph.nodes) {
    if (node.type !== 'step' || node.details?.['in_step']) {
      continue;
    }
    const name = String(node.details?.['name'] ?? node.label);
    if (!names.includes(name)) {
      names.push(name);
    }
  }
  return names;
}

/** The counts part of the header: `attempt 2 of 3 · 2 executed · 3 reused`. */
export function runFacts(run: RunInfo): string {
  const parts: string[] = [];
  if (run.attempt) {
    // earlier attempts that ended waiting are not counted (a waiting run's latest neither)
    const counted = run.attempts_counted;
    const plain = run.status === 'waiting' ? run.attempt - 1 : run.attempt;
    parts.push(
      counted !== undefined && counted !== plain
        ? `attempt ${run.attempt} · ${counted} of ${run.attempts_max ?? 3} counted`
        : `attempt ${run.attempt} of ${run.attempts_max ?? 3}`
    );
  }
  parts.push(`${run.executed ?? 0} executed`);
  if (run.reused) {
    parts.push(`${run.reused} reused`);
  }
  return parts.join(' · ');
}

/** Why the run stopped, in words, or '' when it did not. */
export function runReason(run: RunInfo): string {
  if (run.reason) {
    return run.reason;
  }
  const error = run.error;
  if (error?.message) {
    return error.line ? `${error.message} (relay.py line ${error.line})` : error.message;
  }
  return '';
}

/** The message an answer button sends: Approve / Reject with the input as `note`, or the
 * input itself as JSON (`null` when it is not JSON). */
export function answerMessage(kind: 'approve' | 'reject' | 'json', input: string): unknown {
  const text = input.trim();
  if (kind === 'json') {
    try {
      return JSON.parse(text) as unknown;
    } catch {
      return null;
    }
  }
  const message: Record<string, unknown> = { approved: kind === 'approve' };
  if (text) {
    message['note'] = text;
  }
  return message;
}

/** The run's latest events and stream values as a strip of rows (null when there are none). */
export function eventsStrip(events: RunEventsInfo | undefined): HTMLDivElement | null {
  const rows = [...(events?.events ?? []), ...(events?.streams ?? [])];
  if (!rows.length) {
    return null;
  }
  const strip = h('div', 'jp-RelayRunEvents');
  for (const event of events?.events ?? []) {
    const row = h('div', 'jp-RelayRunEvents-row jp-RelayRunEvents-event');
    row.dataset['key'] = event.key;
    row.append(h('span', 'jp-RelayRunEvents-kind', 'event'), h('code', 'jp-RelayRunEvents-key', event.key));
    row.append(h('span', 'jp-RelayRunEvents-value', event.preview));
    strip.appendChild(row);
  }
  for (const stream of events?.streams ?? []) {
    const row = h('div', 'jp-RelayRunEvents-row jp-RelayRunEvents-stream');
    row.dataset['key'] = stream.key;
    row.dataset['count'] = String(stream.count);
    const count = `${stream.count} value${stream.count === 1 ? '' : 's'}${stream.closed ? ', closed' : ''}`;
    row.append(
      h('span', 'jp-RelayRunEvents-kind', 'stream'),
      h('code', 'jp-RelayRunEvents-key', stream.key),
      h('span', 'jp-RelayRunEvents-count', count)
    );
    const values = h('span', 'jp-RelayRunEvents-value');
    const skipped = stream.count - stream.values.length;
    values.textContent = (skipped > 0 ? '… ' : '') + stream.values.map(v => v.preview).join(' · ');
    row.appendChild(values);
    strip.appendChild(row);
  }
  return strip;
}

/** Whether a status may still change by itself (a view keeps listening). */
export function isGoing(status: string | null | undefined): boolean {
  return status === 'running' || status === 'queued' || status === 'starting' || !status;
}

/** The header element with its buttons; `act` is called when one is pressed. */
export class RunHeader {
  readonly node: HTMLDivElement;
  private readonly message: HTMLDivElement;
  private busy = false;
  private buttons: HTMLButtonElement[] = [];
  private answers: HTMLButtonElement[] = [];
  private run: RunInfo | null = null;
  private steps: string[] = [];

  constructor(private readonly act: (action: ViewAction) => void) {
    this.node = h('div', 'jp-RelayRunHeader');
    this.message = h('div', 'jp-RelayRunHeader-message');
  }

  /** Show `graph`'s run (nothing when the graph is not a run graph). */
  update(graph: GraphDocument): void {
    const run = graph.run ?? null;
    this.run = run;
    this.node.replaceChildren();
    this.answers = [];
    this.node.hidden = run === null;
    if (run === null) {
      return;
    }
    const status = run.status ?? 'starting';
    this.node.dataset['status'] = status;
    this.node.dataset['runId'] = run.run_id;
    const top = h('div', 'jp-RelayRunHeader-top');
    const id = h('code', 'jp-RelayRunHeader-id', run.run_id);
    const badge = statusBadge(status);
    badge.classList.add('jp-RelayRunHeader-status');
    badge.textContent = statusText(status);
    top.append(h('span', 'jp-RelayRunHeader-label', 'run'), id, badge);
    top.append(h('span', 'jp-RelayRunHeader-facts', runFacts(run)));
    this.node.appendChild(top);
    if (run.waiting?.text) {
      this.node.appendChild(h('div', 'jp-RelayRunHeader-waiting', run.waiting.text));
    }
    const reason = runReason(run);
    if (reason) {
      const kind = run.error ? 'error' : 'reason';
      this.node.appendChild(h('div', `jp-RelayRunHeader-${kind}`, reason));
    }
    if (run.fork) {
      const f = run.fork;
      const edits = [...(f.input_edited ? ['input'] : []), ...(f.edited ?? [])];
      this.node.appendChild(
        h(
          'div',
          'jp-RelayRunHeader-fork',
          `forked from ${f.parent} at ${f.from} · ${f.copied ?? 0} copied` +
            (edits.length ? ` · edited: ${edits.join(', ')}` : '') +
            (f.code ? ` · on ${f.code} code` : '')
        )
      );
    }
    if (run.result !== undefined && run.result !== null) {
      const result = h('div', 'jp-RelayRunHeader-result');
      result.append('result: ', h('code', '', run.result));
      this.node.appendChild(result);
    }
    if (run.recovered) {
      this.node.appendChild(h('div', 'jp-RelayRunHeader-recovered', run.recovered));
    }
    if (run.usage) {
      this.node.appendChild(h('div', 'jp-RelayRunHeader-usage', run.usage));
    }
    if (run.note) {
      this.node.appendChild(h('div', 'jp-RelayRunHeader-note', run.note));
    }
    if (run.drawn) {
      this.node.appendChild(h('div', 'jp-RelayRunHeader-drawn', run.drawn));
    }
    if (run.next) {
      const next = h('div', 'jp-RelayRunHeader-next');
      next.append('Next: ', h('code', '', run.next));
      this.node.appendChild(next);
    }
    const strip = eventsStrip(run.events);
    if (strip) {
      this.node.appendChild(strip);
    }
    if (status === 'waiting' && run.waiting?.kind === 'message' && run.waiting.topic) {
      this.node.appendChild(this.answerBox(run, run.waiting.topic));
    }
    this.node.appendChild(this.controls(graph, run));
    this.node.appendChild(this.message);
  }

  /** An input and Approve / Reject / Send JSON for a run waiting for a message on `topic`. */
  private answerBox(run: RunInfo, topic: string): HTMLDivElement {
    const box = h('div', 'jp-RelayRunHeader-answer');
    box.dataset['topic'] = topic;
    box.appendChild(h('span', 'jp-RelayRunHeader-answerLabel', `answer on topic "${topic}":`));
    const input = h('input', 'jp-RelayRunHeader-answerInput');
    input.type = 'text';
    input.placeholder = 'a note (optional), or a JSON value to send';
    input.title = 'Approve and Reject send {"approved": true|false, "note": this text}; Send JSON sends this text as JSON';
    // typing here must not run notebook shortcuts
    input.setAttribute('data-lm-suppress-shortcuts', '');
    input.addEventListener('keydown', event => event.stopPropagation());
    const send = (kind: 'approve' | 'reject' | 'json') => {
      const message = answerMessage(kind, input.value);
      if (kind === 'json' && message === null && input.value.trim() !== 'null') {
        this.say(`Send JSON: ${JSON.stringify(input.value.trim())} is not JSON (e.g. {"approved": true})`, true);
        return;
      }
      this.act({ action: 'send', run_id: run.run_id, topic, message });
    };
    const approve = this.button('approve', `Send {"approved": true} on topic "${topic}" and resume the run`, () =>
      send('approve')
    );
    const reject = this.button('reject', `Send {"approved": false} on topic "${topic}" and resume the run`, () =>
      send('reject')
    );
    const json = this.button('send JSON', `Send the input, as JSON, on topic "${topic}"`, () => send('json'));
    approve.classList.add('jp-RelayRunHeader-approve');
    reject.classList.add('jp-RelayRunHeader-reject');
    for (const button of [approve, reject, json]) {
      button.dataset['answer'] = '1';
    }
    box.append(input, approve, reject, json);
    this.answers = [approve, reject, json];
    return box;
  }

  /** A line under the buttons (an error, or a note about the kernel); '' clears it. */
  say(text: string, isError = false): void {
    this.message.textContent = text;
    this.message.classList.toggle('jp-mod-error', isError);
  }

  /** While a button's run goes, the buttons wait. */
  setBusy(busy: boolean): void {
    this.busy = busy;
    this.refreshButtons();
  }

  private controls(graph: GraphDocument, run: RunInfo): HTMLDivElement {
    const bar = h('div', 'jp-RelayRunHeader-actions');
    // a draft changed since this run: run again runs the draft as it is now, so its steps
    const draftSteps = run.code?.draft_steps;
    const steps = draftSteps ?? crashTargets(graph);
    this.steps = steps;
    const code = draftSteps ? ' (the current draft, changed since this run)' : '';
    const select = picker(
      'jp-RelayRunHeader-step',
      draftSteps ? 'The step a crash test stops at, in the current draft' : 'The step a crash test stops at',
      steps
    );
    const again = this.button('run again', `Run the relay again${code} with this run's input`, () =>
      this.act({ action: 'run', run_id: run.run_id })
    );
    const after = this.button('crash after', `Run again${code}, crashing right after the step's checkpoint`, () =>
      this.act({ action: 'run', run_id: run.run_id, crash: `after:${select.value}` })
    );
    const during = this.button(
      'crash during',
      `Run again${code}, crashing inside the step, before its checkpoint`,
      () => this.act({ action: 'run', run_id: run.run_id, crash: `during:${select.value}` })
    );
    const recover = this.button('recover', '', () =>
      this.act({ action: 'recover', run_id: run.run_id })
    );
    recover.dataset['action'] = 'recover';
    after.dataset['needsStep'] = during.dataset['needsStep'] = '1';
    if (draftSteps) {
      // the graph shows this run's code; these buttons run the draft as it is now
      bar.append(h('span', 'jp-RelayRunHeader-on', 'on the current draft:'));
    }
    bar.append(again, select, after, during, recover);
    this.buttons = [again, after, during, recover];
    if (!steps.length) {
      select.disabled = true;
      select.title = 'This relay has no steps to crash at';
    }
    this.refreshButtons();
    return bar;
  }

  private button(label: string, title: string, onClick: () => void): HTMLButtonElement {
    const button = h('button', 'jp-RelayGraph-button jp-RelayRunHeader-button', label);
    button.type = 'button';
    button.title = title;
    button.dataset['label'] = label;
    button.addEventListener('click', () => {
      if (!button.disabled) {
        onClick();
      }
    });
    return button;
  }

  private refreshButtons(): void {
    const run = this.run;
    for (const button of this.answers) {
      button.disabled = this.busy || run?.status !== 'waiting';
    }
    for (const button of this.buttons) {
      let why = '';
      if (this.busy) {
        why = 'Wait for the run this view started to finish';
      } else if (button.dataset['action'] === 'recover') {
        why = recoverRefusal(run);
      } else if (button.dataset['needsStep'] && !this.steps.length) {
        why = 'This relay has no steps to crash at';
      }
      button.disabled = why !== '';
      if (button.dataset['action'] === 'recover') {
        button.title = why || `Recover run ${run?.run_id}: the next attempt reuses its checkpoints`;
      } else if (why) {
        button.title = why;
      }
    }
  }
}

/** Why recovery cannot apply to `run` now ('' when it can). */
export function recoverRefusal(run: RunInfo | null): string {
  const status = run?.status ?? 'starting';
  if (status === 'interrupted') {
    const used = run?.attempts_counted ?? run?.attempt;
    const spent = used && run?.attempts_max && used >= run.attempts_max;
    return spent ? `All ${run?.attempts_max} attempts of this run are used` : '';
  }
  if (status === 'succeeded' || status === 'failed') {
    return `The run ${status === 'failed' ? 'failed (a relay error is final)' : 'succeeded'}; there is nothing to recover`;
  }
  if (status === 'needs_reconciliation') {
    return 'Settle the uncertain call with %relay reconcile first';
  }
  if (status === 'waiting') {
    return run?.waiting?.kind === 'message'
      ? 'The run is waiting for a message: answer it, and it resumes'
      : 'The run is sleeping: it resumes once its timer is due';
  }
  if (isGoing(status)) {
    return 'The run is still going';
  }
  return `A ${statusText(status)} run cannot be recovered from here`;
}
