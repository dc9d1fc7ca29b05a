/**
 * The side panel's "files" section: the selected run's `execution/` folder through the REST API
 * (`GET runs/{id}/files`, `GET runs/{id}/files/{path}`), each agent call's folder labelled by
 * agent, step and attempt, and a preview of the file a user clicks (text, pretty JSON, images).
 *
 * Design: the section is one long-lived node the panel re-attaches on every refresh, so an
 * open folder and the preview shown survive polling; the list is fetched again only when the
 * run changes or while it is still going.
 */

import type { RelayApi } from './api.js';
import { h } from './dom.js';

/** One file of `GET runs/{id}/files`. */
export interface FileEntry {
  path: string;
  size: number;
  modified: number;
}

/** One agent call's folder, `execution/call-N/`. */
export interface CallFolder {
  folder: string;
  agent: string | null;
  attempt: number | null;
  step: string | null;
  reused_in: number[];
  has_receipt: boolean;
  label: string;
  files: FileEntry[];
}

/** `GET runs/{id}/files`. */
export interface RunFiles {
  run_id: string;
  calls: CallFolder[];
  files: FileEntry[];
}

/** `GET runs/{id}/files/{path}`. */
export interface FilePreview {
  path: string;
  size: number;
  content_type: string;
  kind: 'text' | 'json' | 'image' | 'binary';
  text: string | null;
  data: string | null;
  truncated: boolean;
  limit: number;
}

/** `812 B`, `3.4 KiB`, `1.2 MiB` (as the notebook's view writes sizes). */
export function sizeText(size: number): string {
  if (size < 1024) {
    return `${size} B`;
  }
  if (size < 1024 * 1024) {
    return `${(size / 1024).toFixed(1)} KiB`;
  }
  return `${(size / 1024 / 1024).toFixed(1)} MiB`;
}

function callNote(call: CallFolder): string {
  const notes: string[] = [];
  if (call.reused_in.length) {
    notes.push(`reused in attempt ${call.reused_in.join(', ')}`);
  }
  if (!call.has_receipt) {
    notes.push('no receipt: its attempt ended during the call, or it is still running');
  }
  return notes.length ? ` (${notes.join('; ')})` : '';
}

/** The "files" section of the panel's run view. */
export class FilesSection {
  readonly node: HTMLDivElement;
  private readonly tree: HTMLDivElement;
  private readonly preview: HTMLDivElement;
  private runId: string | null = null;
  private files: RunFiles | null = null;
  private open = new Set<string>();
  private shown: string | null = null;

  constructor(private readonly api: RelayApi) {
    this.node = h('div', 'jp-RelayFiles');
    this.tree = h('div', 'jp-RelayFiles-tree');
    this.preview = h('div', 'jp-RelayFiles-preview');
    this.node.append(h('h4', 'jp-RelayPanel-heading', 'files'), this.tree, this.preview);
  }

  /** Show run `runId`'s files; fetched again when the run changes or while it goes. */
  async show(runId: string, active: boolean): Promise<void> {
    if (runId !== this.runId) {
      this.runId = runId;
      this.files = null;
      this.open.clear();
      this.shown = null;
      this.preview.replaceChildren();
    } else if (this.files !== null && !active) {
      return;
    }
    try {
      this.files = await this.api.request<RunFiles>(
        'GET',
        `runs/${encodeURIComponent(runId)}/files`
      );
    } catch (error) {
      this.tree.replaceChildren(h('div', 'jp-RelayPanel-error', String(error)));
      return;
    }
    if (this.runId === runId) {
      this.render();
    }
  }

  /** Open call folder `folder` (`call-3`) and bring it into view. */
  reveal(folder: string): void {
    this.open.add(folder);
    this.render();
    const details = this.tree.querySelector<HTMLDetailsElement>(`details[data-folder="${folder}"]`);
    if (details) {
      details.open = true;
      details.classList.add('jp-mod-revealed');
      details.scrollIntoView?.({ block: 'nearest' });
    }
  }

  private render(): void {
    const files = this.files;
    if (files === null) {
      return;
    }
    this.tree.replaceChildren();
    if (!files.calls.length && !files.files.length) {
      this.tree.appendChild(h('div', 'jp-RelayPanel-note', 'no files yet'));
    }
    for (const call of files.calls) {
      this.tree.appendChild(
        this.folder(call.folder, call.label + callNote(call), call.files, call.folder)
      );
    }
    if (files.files.length) {
      this.tree.appendChild(this.folder('', 'files the relay wrote', files.files, ''));
    }
  }

  private folder(key: string, label: string, entries: FileEntry[], prefix: string): HTMLElement {
    const details = h('details', 'jp-RelayFiles-folder');
    details.dataset['folder'] = key || '.';
    details.open = this.open.has(key) || entries.length <= 4;
    details.addEventListener('toggle', () => {
      if (details.open) {
        this.open.add(key);
      } else {
        this.open.delete(key);
      }
    });
    details.appendChild(h('summary', '', label));
    const list = h('ul', 'jp-RelayFiles-list');
    for (const entry of entries) {
      const item = h('li', 'jp-RelayFiles-file');
      item.dataset['path'] = entry.path;
      const name = h('a', '', prefix ? entry.path.slice(prefix.length + 1) : entry.path);
      name.href = '#';
      name.title = `Preview ${entry.path}`;
      name.addEventListener('click', event => {
        event.preventDefault();
        void this.showFile(entry.path);
      });
      item.append(name, ` ${sizeText(entry.size)}`);
      if (entry.path === this.shown) {
        item.classList.add('jp-mod-selected');
      }
      list.appendChild(item);
    }
    details.appendChild(list);
    return details;
  }

  /** Preview one file under the tree. */
  async showFile(path: string): Promise<void> {
    const runId = this.runId;
    if (runId === null) {
      return;
    }
    this.shown = path;
    this.render();
    const box = this.preview;
    box.replaceChildren(h('div', 'jp-RelayPanel-note', `loading ${path}…`));
    let file: FilePreview;
    try {
      file = await this.api.request<FilePreview>(
        'GET',
        `runs/${encodeURIComponent(runId)}/files/${encodeURIComponent(path)}`
      );
    } catch (error) {
      box.replaceChildren(h('div', 'jp-RelayPanel-error', String(error)));
      return;
    }
    if (this.shown !== path || this.runId !== runId) {
      return;
    }
    box.replaceChildren(h('div', 'jp-RelayFiles-name', `${file.path} · ${file.content_type}`));
    if (file.kind === 'image') {
      if (file.data === null) {
        box.appendChild(
          h('div', 'jp-RelayPanel-note', `image of ${sizeText(file.size)}: too large to show`)
        );
      } else {
        const img = h('img', 'jp-RelayFiles-image');
        img.alt = file.path;
        img.style.maxWidth = '100%';
        img.src = `data:${file.content_type};base64,${file.data}`;
        box.appendChild(img);
      }
      return;
    }
    if (file.kind === 'binary') {
      box.appendChild(h('div', 'jp-RelayPanel-note', 'binary file: no preview'));
      return;
    }
    const pre = h('pre', 'jp-RelayFiles-text', file.text ?? '');
    pre.style.maxHeight = '24em';
    pre.style.overflow = 'auto';
    box.appendChild(pre);
    if (file.truncated) {
      box.appendChild(
        h(
          'div',
          'jp-RelayFiles-cut',
          `cut at ${sizeText(file.limit)} of ${sizeText(file.size)}; the file is whole on disk`
        )
      );
    }
  }
}
