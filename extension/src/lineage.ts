/**
 * A run's lineage in the side panel: the fork tree it belongs to (`GET /runs/{id}/lineage`),
 * from the run it was first forked from, each run with its status and the call it was forked
 * from; the run shown is marked, the others open on a click.
 */

import { statusBadge } from './runtable.js';

export interface LineageNode {
  run_id: string;
  status: string;
  fork?: {
    parent?: string | null;
    from?: string | null;
    edits?: { input?: unknown; outputs?: string[] } | null;
    code?: string | null;
  };
  forks: LineageNode[];
}

/** How many runs the tree holds. */
export function lineageSize(tree: LineageNode): number {
  return 1 + tree.forks.reduce((n, f) => n + lineageSize(f), 0);
}

function forkText(node: LineageNode): string {
  const fork = node.fork;
  if (!fork) {
    return '';
  }
  const edits = fork.edits ?? {};
  const edited = [...(edits.input ? ['input'] : []), ...(edits.outputs ?? [])];
  let text = ` from ${fork.from ?? '?'}`;
  if (fork.code && fork.code !== "the parent's") {
    text += ` · on ${fork.code}`; // "the draft", "release 2"
  }
  if (edited.length) {
    text += ` · edited ${edited.join(', ')}`;
  }
  return text;
}

/** The tree as nested lists; null when the run has no forks and was not forked. */
export function lineageSection(
  tree: LineageNode,
  current: { run_id: string; status: string },
  onOpen: (runId: string) => void
): HTMLElement | null {
  if (lineageSize(tree) < 2) {
    return null;
  }
  const section = document.createElement('div');
  section.className = 'jp-RelayLineage';
  const title = document.createElement('h4');
  title.className = 'jp-RelayPanel-heading';
  title.textContent = 'lineage';
  section.appendChild(title);
  const list = (nodes: LineageNode[]): HTMLUListElement => {
    const ul = document.createElement('ul');
    ul.className = 'jp-RelayLineage-list';
    for (const node of nodes) {
      const li = document.createElement('li');
      li.className = 'jp-RelayLineage-run';
      li.dataset['runId'] = node.run_id;
      let name: HTMLElement;
      if (node.run_id === current.run_id) {
        name = document.createElement('strong');
        li.classList.add('jp-mod-current');
      } else {
        const link = document.createElement('a');
        link.href = '#';
        link.className = 'jp-RelayPanel-link';
        link.title = `Open run ${node.run_id}`;
        link.addEventListener('click', event => {
          event.preventDefault();
          onOpen(node.run_id);
        });
        name = link;
      }
      name.textContent = node.run_id;
      // the run shown: its detail's status is fresher than its record's just as it ends
      const status = node.run_id === current.run_id ? current.status : node.status;
      li.append(name, ' ', statusBadge(status), forkText(node));
      if (node.forks.length) {
        li.appendChild(list(node.forks));
      }
      ul.appendChild(li);
    }
    return ul;
  };
  section.appendChild(list([tree]));
  return section;
}
