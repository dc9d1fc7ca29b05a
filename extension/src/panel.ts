/**
 * The "Relays" side panel: the workspace's relays, releases and runs through the REST API (no
 * kernel needed), a run's attempts, steps and run graph, and run / crash-test / recover buttons.
 *
 * Design: the panel polls, every two seconds while a run it shows is pending or running and
 * the panel is visible, and stops polling once everything it shows has finished. Each refresh
 * redraws the lists but keeps the graph view, so a user's pan and zoom survive updates.
 */

import { Widget } from '@lumino/widgets';

import {
  RelayApi,
  RelayApiError,
  RelayApiUnavailableError,
  RelayDetail,
  RelaySummary,
  RunDetail
} from './api.js';
import { h, picker } from './dom.js';
import { FilesSection } from './files.js';
import { NotebookFront, WorkspaceBar } from './follow.js';
import { LineageNode, lineageSection } from './lineage.js';
import { crashText, formatDuration, RunRow, statusText } from './format.js';
import type { RunInfo } from './geometry.js';
import { GraphView } from './graphview.js';
import { crashTargets, eventsStrip, recoverRefusal, runReason } from './header.js';
import { isActiveRunStatus } from './palette.js';
import { reusedBadge, runList, statusBadge } from './runtable.js';

export const PANEL_ID = 'relay-panel';
export const POLL_MS = 2000;

function button(label: string, title: string, onClick: () => void): HTMLButtonElement {
  const b = h('button', 'jp-RelayPanel-button', label);
  b.type = 'button';
  b.title = title;
  b.addEventListener('click', onClick);
  return b;
}

/** The side panel widget; give it a `RelayApi` bound to the application's server settings. */
export class RelayPanel extends Widget {
  readonly api: RelayApi;
  private readonly message: HTMLDivElement;
  private readonly relaysBox: HTMLDivElement;
  private readonly relayBox: HTMLDivElement;
  private readonly runBox: HTMLDivElement;
  private readonly graphView: GraphView;
  private readonly filesSection: FilesSection;
  readonly workspaceBar: WorkspaceBar;
  private readonly inputArea: HTMLTextAreaElement;
  private relays: RelaySummary[] = [];
  private relayName: string | null = null;
  private relay: RelayDetail | null = null;
  private runs: RunRow[] = [];
  private runId: string | null = null;
  private run: RunDetail | null = null;
  private lineage: LineageNode | null = null;
  private timer: number | null = null;
  private busy = false;
  private refreshAgain = false;

  constructor(api: RelayApi) {
    super();
    this.api = api;
    this.id = PANEL_ID;
    this.addClass('jp-RelayPanel');
    this.title.caption = 'Relays';
    const header = h('div', 'jp-RelayPanel-header');
    header.append(
      h('h2', 'jp-RelayPanel-title', 'Relays'),
      button('⟳', 'Refresh the relays and runs', () => void this.refresh(true))
    );
    this.workspaceBar = new WorkspaceBar(api, () => {
      this.relayName = null;
      this.relay = null;
      this.runId = null;
      this.run = null;
      void this.refresh(true);
    });
    this.message = h('div', 'jp-RelayPanel-message');
    this.message.hidden = true;
    this.relaysBox = h('div', 'jp-RelayPanel-relays');
    this.relayBox = h('div', 'jp-RelayPanel-relay');
    this.runBox = h('div', 'jp-RelayPanel-run');
    this.graphView = new GraphView({
      maxHeight: 360,
      minFitScale: 0.2,
      onFork: (call, draft) => void this.forkRun(call, draft),
      onFiles: folder => this.filesSection.reveal(folder)
    });
    this.filesSection = new FilesSection(api);
    this.inputArea = h('textarea', 'jp-RelayPanel-input');
    this.inputArea.value = '{}';
    this.inputArea.rows = 2;
    this.inputArea.spellcheck = false;
    this.inputArea.title = 'The run input (JSON), passed to run(INPUT)';
    this.node.append(
      header,
      this.workspaceBar.node,
      this.message,
      this.relaysBox,
      this.relayBox,
      this.runBox
    );
  }

  /** Reload everything shown; `full` also reloads the selected relay's graph and releases. */
  async refresh(full = false): Promise<void> {
    if (this.busy) {
      this.refreshAgain = true;
      return;
    }
    this.busy = true;
    this.stopPolling();
    try {
      this.relays = await this.api.listRelays();
      if (this.relayName !== null && !this.relays.some(r => r.name === this.relayName)) {
        this.relayName = null;
        this.runId = null;
      }
      if (this.relayName !== null) {
        if (full || this.relay === null || this.relay.name !== this.relayName) {
          this.relay = await this.api.getRelay(this.relayName);
        }
        this.runs = await this.api.listRuns(this.relayName);
      } else {
        this.relay = null;
        this.runs = [];
      }
      this.run = this.runId !== null ? await this.api.getRun(this.runId) : null;
      this.lineage = this.runId !== null ? await this.api.getLineage(this.runId) : null;
      this.showMessage(null);
    } catch (error) {
      this.handleError(error);
    } finally {
      this.busy = false;
    }
    this.render();
    if (full) {
      void this.workspaceBar.update();
    }
    if (this.refreshAgain) {
      this.refreshAgain = false;
      void this.refresh();
      return;
    }
    if (this.needsPolling()) {
      this.timer = window.setTimeout(() => void this.refresh(), POLL_MS);
    }
  }

  /** The notebook in front changed: offer its workspace when it is not the one shown. */
  follow(front: NotebookFront | null, force = false): Promise<void> {
    return this.workspaceBar.follow(front, force);
  }

  /** Show one relay's releases and runs. */
  async openRelay(name: string | null): Promise<void> {
    this.relayName = name;
    this.relay = null;
    this.runId = null;
    this.run = null;
    await this.refresh(true);
  }

  /** Show one run's attempts, steps and run graph. */
  async openRun(runId: string | null): Promise<void> {
    this.runId = runId;
    await this.refresh();
  }

  /** Start a run of the open relay; `crash` (`after:STEP`, `during:STEP#2`) crashes it there. */
  async startRun(crash: string | null = null): Promise<void> {
    if (this.relayName === null) {
      return;
    }
    let input: unknown;
    try {
      input = JSON.parse(this.inputArea.value || 'null');
    } catch (error) {
      this.showMessage(`The run input is not valid JSON (${String(error)}); fix it and retry.`);
      return;
    }
    const relay = this.relayName;
    await this.request(async () => {
      this.runId = (await this.api.startRun(relay, input, crash)).run_id;
    });
  }

  /** Fork the open run from `call` (`STEP#N`), then show the fork. */
  async forkRun(call: string, draft: boolean): Promise<void> {
    const runId = this.runId;
    if (runId === null) {
      return;
    }
    await this.request(async () => {
      this.runId = (await this.api.forkRun(runId, call, draft)).run_id;
    });
  }

  /** Delete the open run, after asking. */
  async deleteRun(): Promise<void> {
    const runId = this.runId;
    if (runId === null || !window.confirm(`Delete run ${runId}? Its folder and record go.`)) {
      return;
    }
    await this.request(async () => {
      await this.api.deleteRun(runId);
      this.runId = null;
    });
  }

  /** Recover the open run: reused steps come back from their checkpoints. */
  async recoverRun(): Promise<void> {
    const runId = this.runId;
    if (runId === null) {
      return;
    }
    await this.request(() => this.api.recoverRun(runId));
  }

  /** Send `change` (a request that starts, forks, recovers or deletes a run), then refresh;
   * when the server refuses it, say why instead. */
  private async request(change: () => Promise<unknown>): Promise<void> {
    try {
      await change();
    } catch (error) {
      this.handleError(error);
      this.render();
      return;
    }
    await this.refresh();
  }

  override dispose(): void {
    this.stopPolling();
    this.graphView.dispose();
    super.dispose();
  }

  protected override onAfterShow(): void {
    void this.refresh(true);
  }

  protected override onAfterHide(): void {
    this.stopPolling();
  }

  private needsPolling(): boolean {
    if (!this.isVisible) {
      return false;
    }
    return (
      this.runs.some(r => isActiveRunStatus(r.status)) ||
      (this.run !== null && isActiveRunStatus(this.run.status))
    );
  }

  private stopPolling(): void {
    if (this.timer !== null) {
      window.clearTimeout(this.timer);
      this.timer = null;
    }
  }

  private handleError(error: unknown): void {
    if (error instanceof RelayApiUnavailableError) {
      this.relays = [];
      this.relay = null;
      this.runs = [];
      this.run = null;
      this.showMessage(`relay API unavailable: ${error.message}`, 'unavailable');
    } else if (error instanceof RelayApiError) {
      this.showMessage(`${error.message} [${error.code}]`);
    } else {
      this.showMessage(`The relay panel failed: ${String(error)}`);
    }
  }

  private showMessage(text: string | null, kind = 'error'): void {
    this.message.hidden = text === null;
    this.message.textContent = text ?? '';
    this.message.dataset['kind'] = kind;
  }

  private render(): void {
    this.renderRelays();
    this.renderRelay();
    this.renderRun();
  }

  private renderRelays(): void {
    const box = this.relaysBox;
    box.replaceChildren();
    if (!this.relays.length) {
      if (this.message.hidden) {
        box.appendChild(
          h('p', 'jp-RelayPanel-empty', 'No relays in this workspace yet: save one with %%relay.')
        );
      }
      return;
    }
    const list = h('ul', 'jp-RelayPanel-list');
    for (const relay of this.relays) {
      const item = h('li', 'jp-RelayPanel-item');
      item.dataset['relay'] = relay.name;
      item.tabIndex = 0;
      if (relay.name === this.relayName) {
        item.classList.add('jp-mod-selected');
      }
      const latest = relay.latest ? `, latest v${relay.latest.version}` : '';
      item.append(
        h('span', 'jp-RelayPanel-name', relay.name),
        h(
          'span',
          'jp-RelayPanel-meta',
          `${relay.releases} release${relay.releases === 1 ? '' : 's'}${latest} · ` +
            `${relay.runs} run${relay.runs === 1 ? '' : 's'}` +
            (relay.access === 'revoked' ? ' · access revoked' : '')
        )
      );
      if (relay.broken) {
        // a draft that fails admission: listed, and says why
        item.classList.add('jp-mod-broken');
        item.dataset['broken'] = 'true';
        item.appendChild(
          h('span', 'jp-RelayPanel-broken', `broken: ${relay.problem ?? 'fails admission'}`)
        );
      }
      const open = () => void this.openRelay(relay.name === this.relayName ? null : relay.name);
      item.addEventListener('click', open);
      item.addEventListener('keydown', e => e.key === 'Enter' && open());
      list.appendChild(item);
    }
    box.appendChild(list);
  }

  private renderRelay(): void {
    const box = this.relayBox;
    box.replaceChildren();
    const relay = this.relay;
    if (relay === null) {
      return;
    }
    box.appendChild(h('h3', 'jp-RelayPanel-heading', relay.name));
    const releases = relay.releases.length
      ? relay.releases.map(r => `v${r.version} (${r.hash.slice(0, 8)})`).join(', ')
      : 'none yet (publish with %relay publish)';
    box.appendChild(h('div', 'jp-RelayPanel-meta', `releases: ${releases}`));
    const label = h('label', 'jp-RelayPanel-label', 'input');
    box.append(label, this.inputArea);
    const actions = h('div', 'jp-RelayPanel-actions');
    actions.appendChild(
      button('▶ Run', `Start a run of the ${relay.name} draft`, () => void this.startRun())
    );
    const steps = relay.graph ? crashTargets(relay.graph) : [];
    const when = picker(
      'jp-RelayPanel-when',
      'Crash right after the step\'s checkpoint, or inside its body before it',
      ['after', 'during']
    );
    const step = picker('jp-RelayPanel-step', 'The step the crash test stops at', steps);
    const crash = button(
      '⚡ Crash test',
      steps.length
        ? 'Start a run that crashes at the chosen step (after its checkpoint, or during its body)'
        : 'This relay has no step to crash at',
      () => void this.startRun(`${when.value}:${step.value}`)
    );
    crash.disabled = when.disabled = step.disabled = steps.length === 0;
    actions.append(crash, when, step);
    box.appendChild(actions);
    box.appendChild(
      runList(this.runs, {
        selected: this.runId,
        onOpen: run => void this.openRun(run.run_id === this.runId ? null : run.run_id)
      })
    );
    if (this.runId === null && relay.graph) {
      // the flow graph before any run is chosen: what the relay will do
      box.appendChild(this.graphView.node);
      this.graphView.setGraph(relay.graph);
    }
  }

  private renderRun(): void {
    const box = this.runBox;
    box.replaceChildren();
    const run = this.run;
    if (run === null) {
      return;
    }
    box.dataset['runId'] = run.run_id;
    const heading = h('h3', 'jp-RelayPanel-heading', `run ${run.run_id} `);
    heading.appendChild(statusBadge(run.graph?.run?.status ?? run.status));
    box.appendChild(heading);
    const actions = h('div', 'jp-RelayPanel-actions');
    const info: RunInfo = run.graph?.run ?? {
      run_id: run.run_id,
      status: run.status,
      attempt: run.attempt,
      attempts_max: 3
    };
    const refusal = recoverRefusal(info);
    const recover = button(
      '↻ Recover',
      refusal || 'Recover this run: completed steps are reused from their checkpoints',
      () => void this.recoverRun()
    );
    recover.disabled = refusal !== '';
    const remove = button(
      '🗑 Delete',
      isActiveRunStatus(run.status)
        ? 'The run is still going: it cannot be deleted now'
        : 'Delete this run (its release stays)',
      () => void this.deleteRun()
    );
    remove.disabled = isActiveRunStatus(run.status);
    actions.append(recover, remove);
    box.appendChild(actions);
    const fork = info.fork;
    if (fork?.parent) {
      const from = h('div', 'jp-RelayPanel-meta jp-RelayPanel-fork');
      const parent = h('a', 'jp-RelayPanel-link', fork.parent);
      parent.href = '#';
      parent.addEventListener('click', e => {
        e.preventDefault();
        void this.openRun(fork.parent ?? null);
      });
      from.append('forked from ', parent, ` at ${fork.from} · ${fork.copied ?? 0} copied`);
      box.appendChild(from);
    }
    const tree = this.lineage;
    const section = tree ? lineageSection(tree, run, id => void this.openRun(id)) : null;
    if (section) {
      box.appendChild(section);
    }
    const reason = runReason(info) || run.error?.message || '';
    if (reason && info.status === 'interrupted') {
      // a crash test ends here on purpose: the expected state, not an error
      box.appendChild(h('div', 'jp-RelayPanel-note', `${reason}; recover it with ↻ Recover`));
    } else if (reason && info.status === 'needs_reconciliation') {
      // an uncertain call: a person settles it before any recovery
      const note = h('div', 'jp-RelayPanel-note jp-RelayPanel-reconcile', `${reason}; settle it with `);
      note.append(h('code', '', `%relay reconcile ${run.run_id}`), ', then ↻ Recover');
      box.appendChild(note);
    } else if (reason && run.status !== 'succeeded' && run.status !== 'waiting') {
      // (a waiting run's record words what it waits for as its error: the line below says it)
      box.appendChild(h('div', 'jp-RelayPanel-error', reason));
    }
    if (info.waiting?.text) {
      // waiting is no failure: what it waits for, and how to answer it
      const waiting = h('div', 'jp-RelayPanel-note jp-RelayPanel-waiting', info.waiting.text);
      if (info.waiting.kind === 'message') {
        waiting.append('; answer it with ', h('code', '', `%relay send ${run.run_id} ${info.waiting.topic ?? 'TOPIC'} JSON`));
      }
      box.appendChild(waiting);
    }
    for (const [line, kind] of [
      [info.recovered, 'recovered'],
      [info.drawn, 'drawn']
    ] as const) {
      if (line) {
        box.appendChild(h('div', `jp-RelayPanel-meta jp-RelayPanel-${kind}`, line));
      }
    }
    const strip = eventsStrip(info.events);
    if (strip) {
      box.appendChild(strip);
    }
    const attempts = h('ol', 'jp-RelayPanel-attempts');
    // a fork's first attempt replays the checkpoints copied from its parent: "copied", as the
    // run view says, not "reused"
    const copied = fork?.parent ? (fork.copied ?? 0) : 0;
    for (const a of run.attempts ?? []) {
      const item = h('li');
      const replayed = (a.reused ?? []).length;
      const own = a.attempt === 1 ? Math.max(0, replayed - copied) : replayed;
      item.append(
        `attempt ${a.attempt}: `,
        statusBadge(a.status),
        ` ${(a.executed ?? []).length} executed · ` +
          (a.attempt === 1 && copied ? `${copied} copied · ` : ''),
        reusedBadge(own),
        ` ${formatDuration(a.duration_ms)}` + (a.crash ? ` · crash ${crashText(a.crash)}` : '')
      );
      attempts.appendChild(item);
    }
    box.appendChild(attempts);
    box.appendChild(this.stepsTable(run));
    // painted by the server with the notebook's own overlay: each call on its call site's node
    const graph = run.graph ?? null;
    if (graph) {
      box.appendChild(this.graphView.node);
      this.graphView.setGraph(graph);
    }
    // what each agent call and the relay wrote (execution/), kept open across refreshes
    box.appendChild(this.filesSection.node);
    void this.filesSection.show(run.run_id, isActiveRunStatus(run.status));
  }

  private stepsTable(run: RunDetail): HTMLTableElement {
    const table = h('table', 'jp-RelayRuns jp-RelayPanel-steps');
    const head = table.createTHead().insertRow();
    for (const name of ['step', 'status', 'attempts']) {
      head.appendChild(h('th', '', name));
    }
    const body = table.createTBody();
    for (const step of run.steps ?? []) {
      const row = body.insertRow();
      row.dataset['step'] = step.name;
      row.insertCell().textContent = step.name;
      row.insertCell().textContent = statusText(step.status);
      const where = row.insertCell();
      const ran = step.executed_in ?? [];
      // a fork's first attempt replays the checkpoints copied from its parent: "copied from",
      // as the run view says; a later attempt's replay of them is its own reuse
      const copiedFrom = step.copied_from;
      const reused = (step.reused_in ?? []).filter(a => !(copiedFrom && a === 1));
      if (ran.length) {
        where.append(`ran in ${ran.join(', ')} `);
      }
      if (copiedFrom) {
        where.append(h('span', 'jp-RelayBadge jp-RelayBadge--copied', 'copied'));
        where.append(` from ${copiedFrom} `);
      }
      if (reused.length) {
        where.append(h('span', 'jp-RelayBadge jp-RelayBadge--reused', 'reused'));
        where.append(` in ${reused.join(', ')}`);
      }
      row.title = `${step.name}: ${formatDuration(step.duration_ms)}`;
    }
    return table;
  }
}
