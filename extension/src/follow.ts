/**
 * The side panel follows the notebook in front: it asks that notebook's kernel (over the view
 * comm, action "workspace") which workspace its relays live in, and when that is not the one
 * the panel shows, offers to show it (`?workspace=` on every API request) — or says why it
 * cannot (outside the server's root folder, no relay saved there yet). When the server's own
 * workspace has no relays (tutorials opened with `make lab`: each keeps its relays in a hidden
 * folder beside it) there is nothing to lose, and the panel shows the notebook's at once, from
 * one notebook to the next, until the user picks a workspace.
 */

import { RelayApi, RelayApiError, WorkspaceInfo } from './api.js';
import { h } from './dom.js';
import type { KernelLike } from './kernel.js';

export const COMM_TARGET = 'relay_notebook.view';
export const ASK_TIMEOUT_MS = 4000;

/** The notebook in front: its file name and kernel (null when it has none). */
export interface NotebookFront {
  name: string;
  kernel: KernelLike | null;
}

/** Ask `kernel` for its workspace home; null when the kit is not loaded there (no answer). */
export function askKernelHome(kernel: KernelLike, timeoutMs = ASK_TIMEOUT_MS): Promise<string | null> {
  return new Promise(resolve => {
    let settled = false;
    const done = (home: string | null): void => {
      if (!settled) {
        settled = true;
        resolve(home);
      }
    };
    let comm;
    try {
      comm = kernel.createComm(COMM_TARGET);
    } catch {
      done(null);
      return;
    }
    comm.onMsg = msg => {
      const data = msg.content.data as { type?: string; home?: string } | null;
      done(data?.type === 'workspace' && typeof data.home === 'string' ? data.home : null);
      try {
        comm.close();
      } catch {
        // the kernel went away: nothing to close
      }
    };
    comm.onClose = () => done(null); // no such comm target: %load_ext relay_notebook not run
    try {
      comm.open({ action: 'workspace' });
    } catch {
      done(null);
    }
    window.setTimeout(() => done(null), timeoutMs);
  });
}

/** The workspace line at the top of the panel, and the offer to switch. */
export class WorkspaceBar {
  readonly node: HTMLDivElement;
  /** What the panel shows now (null until the first answer). */
  current: WorkspaceInfo | null = null;
  private front: NotebookFront | null = null;
  private frontHome: string | null = null;
  private asked = 0;
  /** Whether the panel still shows the front notebook's workspace by itself (see `update`):
   * until the user picks one with "Show it" or "server’s". */
  private following = true;

  constructor(
    private readonly api: RelayApi,
    private readonly onSwitch: () => void
  ) {
    this.node = h('div', 'jp-RelayPanel-workspace');
  }

  /** Whether the notebook in front told its workspace. */
  knowsFront(): boolean {
    return this.frontHome !== null;
  }

  /** The notebook in front changed (or its kernel did): ask it again. */
  async follow(front: NotebookFront | null, force = false): Promise<void> {
    const same = front !== null && front.kernel !== null && front.kernel === this.front?.kernel;
    this.front = front;
    if (same && !force && this.frontHome !== null) {
      return; // this kernel already told its workspace
    }
    if (!same) {
      this.frontHome = null;
    }
    const asked = ++this.asked;
    const home = front?.kernel ? await askKernelHome(front.kernel) : null;
    if (asked !== this.asked) {
      return; // another notebook came to the front meanwhile
    }
    this.frontHome = home;
    await this.update();
  }

  /** Re-read what the panel shows and redraw the line (after a refresh). */
  async update(): Promise<void> {
    try {
      this.current = await this.api.describeWorkspace();
    } catch {
      this.current = null;
    }
    let offer: WorkspaceInfo | null = null;
    let refusal: string | null = null;
    const home = this.frontHome;
    if (home !== null && this.current !== null && home !== this.current.home) {
      try {
        offer = await this.api.describeWorkspace(home);
      } catch (error) {
        refusal = error instanceof RelayApiError ? error.message : String(error);
      }
      if (offer !== null && offer.home === this.current.home) {
        offer = null; // the same folder, spelled another way
      }
    }
    // nothing to lose (the server's own is empty, or was left for a notebook's by itself):
    // show the notebook's workspace at once instead of offering it
    const idle = this.current !== null && (!this.current.default || this.current.relays === 0);
    if (offer !== null && this.following && idle) {
      this.show(offer.home);
      return;
    }
    this.render(offer, refusal);
  }

  /** Show `home` (null: the server's own workspace). */
  show(home: string | null): void {
    this.api.workspace = home;
    this.onSwitch();
  }

  /** The user picked `home`: from now on the panel offers other workspaces, never switches. */
  choose(home: string | null): void {
    this.following = false;
    this.show(home);
  }

  private render(offer: WorkspaceInfo | null, refusal: string | null): void {
    const box = this.node;
    box.replaceChildren();
    const current = this.current;
    if (current === null) {
      box.hidden = true;
      return;
    }
    box.hidden = false;
    const line = h('div', 'jp-RelayPanel-workspace-line');
    line.append(
      h('span', 'jp-RelayPanel-workspace-label', 'workspace '),
      h('code', 'jp-RelayPanel-workspace-path', current.label)
    );
    line.title = current.home;
    if (!current.default) {
      const back = h('button', 'jp-RelayPanel-button jp-RelayPanel-workspace-back', 'server’s');
      back.type = 'button';
      back.title = "Show the server's own workspace again";
      back.addEventListener('click', () => this.choose(null));
      line.append(back);
    }
    box.append(line);
    const name = this.front?.name ?? 'this notebook';
    if (offer !== null) {
      const note = h('div', 'jp-RelayPanel-workspace-offer');
      const count = `${offer.relays} relay${offer.relays === 1 ? '' : 's'}`;
      note.append(
        h('span', '', `${name} uses the workspace `),
        h('code', '', offer.label),
        h('span', '', ` (${count}). `)
      );
      const go = h('button', 'jp-RelayPanel-button jp-RelayPanel-workspace-switch', 'Show it');
      go.type = 'button';
      go.title = `Show the relays and runs of ${offer.home}`;
      go.addEventListener('click', () => this.choose(offer.home));
      note.append(go);
      box.append(note);
    } else if (refusal !== null) {
      const note = h('div', 'jp-RelayPanel-workspace-offer', `${name}: ${refusal}`);
      note.dataset['kind'] = 'refused';
      box.append(note);
    }
  }
}

/** The parts of JupyterLab's shell and session context followed (typed structurally). */
interface SignalLike<A> {
  connect(slot: (sender: unknown, args: A) => void): boolean;
  disconnect(slot: (sender: unknown, args: A) => void): boolean;
}

interface SessionContextLike {
  session?: { kernel?: KernelLike | null } | null;
  kernelChanged?: SignalLike<unknown>;
  statusChanged?: SignalLike<string>;
  iopubMessage?: SignalLike<{ header?: { msg_type?: string } }>;
}

interface FrontWidget {
  title?: { label?: string };
  sessionContext?: SessionContextLike;
}

export interface ShellLike {
  currentWidget: unknown;
  currentChanged?: SignalLike<unknown>;
}

/** Call `onFront` whenever the notebook in front (or its kernel) changes, and again once the
 * kernel goes idle after running a cell while the panel does not know its workspace yet (the
 * user just ran `%load_ext relay_notebook`) — or, once it knows, calls `onCellRun`; returns the
 * function that asks again. Only cells the user runs trigger that: the panel's own question
 * does not, so a notebook without the kit is asked once, not in a loop. */
export function watchFront(
  shell: ShellLike,
  onFront: (front: NotebookFront | null, force: boolean) => void,
  known: () => boolean,
  onCellRun: () => void = () => undefined
): () => void {
  let watched: SessionContextLike | null = null;
  let ranCell = false;
  const front = (): NotebookFront | null => {
    const widget = shell.currentWidget as FrontWidget | null;
    const context = widget?.sessionContext;
    if (!context) {
      return null;
    }
    const name = widget?.title?.label || 'this notebook';
    return { name, kernel: context.session?.kernel ?? null };
  };
  const ask = (force = false): void => onFront(front(), force);
  const kernelChanged = (): void => ask(true);
  const iopub = (_: unknown, msg: { header?: { msg_type?: string } }): void => {
    if (msg.header?.msg_type === 'execute_input') {
      ranCell = true;
    }
  };
  const statusChanged = (_: unknown, status: string): void => {
    if (status === 'restarting' || status === 'autorestarting') {
      ask(true); // the kit must be loaded again: forget what the old process said
    } else if (status === 'idle' && ranCell) {
      ranCell = false;
      if (!known()) {
        ask();
      } else {
        onCellRun(); // the cell may have saved a relay or started a run: list it
      }
    }
  };
  const rewire = (): void => {
    watched?.kernelChanged?.disconnect(kernelChanged);
    watched?.statusChanged?.disconnect(statusChanged);
    watched?.iopubMessage?.disconnect(iopub);
    watched = (shell.currentWidget as FrontWidget | null)?.sessionContext ?? null;
    watched?.kernelChanged?.connect(kernelChanged);
    watched?.statusChanged?.connect(statusChanged);
    watched?.iopubMessage?.connect(iopub);
  };
  shell.currentChanged?.connect(() => {
    rewire();
    ask();
  });
  rewire();
  return () => ask(true);
}
