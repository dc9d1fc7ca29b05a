/**
 * The client of the relay REST API (`{baseUrl}relay/api`), under the Jupyter server's own
 * authentication: every request goes through `ServerConnection.makeRequest` with the
 * application's server settings, so the token or login cookie and XSRF header come along.
 */

import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import type { RunRow } from './format.js';
import type { GraphDocument } from './geometry.js';
import type { LineageNode } from './lineage.js';

export const API_PATH = 'relay/api';

/** One step record of a run, as `relay logs RUN --json` lists it. */
export interface StepRecord {
  function_id?: number;
  name: string;
  status: string;
  executed_in?: number[];
  reused_in?: number[];
  /** the parent run a fork copied this call's checkpoint from */
  copied_from?: string | null;
  duration_ms?: number | null;
}

/** One relay of `GET relay/api/relays`. */
export interface RelaySummary {
  name: string;
  releases: number;
  latest: { version: number; hash: string } | null;
  runs: number;
  access?: string;
  /** The draft fails admission; `problem` is its first diagnostic. */
  broken?: boolean;
  problem?: string | null;
}

/** One release of a relay. */
export interface ReleaseInfo {
  relay?: string;
  version: number;
  hash: string;
  created_at?: number;
}

/** `GET relay/api/relays/{name}`. */
export interface RelayDetail {
  name: string;
  access?: string;
  releases: ReleaseInfo[];
  graph: GraphDocument;
}

/** One attempt of a run. */
export interface AttemptRecord {
  attempt: number;
  status: string;
  duration_ms?: number | null;
  crash?: string | { when: string; step: string; occurrence?: number } | null;
  executed?: number[];
  reused?: number[];
}

/** `GET relay/api/runs/{run_id}`. */
export interface RunDetail {
  run_id: string;
  relay: string;
  status: string;
  attempt?: number;
  release?: { version: number; hash: string } | null;
  input?: unknown;
  result?: unknown;
  error?: { code?: string; message?: string } | null;
  attempts: AttemptRecord[];
  steps: StepRecord[];
  graph?: GraphDocument;
}

/** A refusal from the API: its stable code and message, and the HTTP status. */
export class RelayApiError extends Error {
  readonly code: string;
  readonly status: number;

  constructor(message: string, code: string, status: number) {
    super(message);
    this.code = code;
    this.status = status;
  }
}

/** The server has no relay API (the server extension is not enabled) or cannot be reached. */
export class RelayApiUnavailableError extends RelayApiError {}

/** Calls the relay REST API of one Jupyter server. */
/** `GET /workspace`: which workspace requests are about. */
export interface WorkspaceInfo {
  home: string;
  /** The path relative to the server's root folder. */
  label: string;
  /** Whether it is the server's own workspace. */
  default: boolean;
  relays: number;
}

export class RelayApi {
  readonly settings: ServerConnection.ISettings;
  /** Another workspace than the server's own (`?workspace=` on every request), or null. */
  workspace: string | null = null;

  constructor(settings?: ServerConnection.ISettings) {
    this.settings = settings ?? ServerConnection.makeSettings();
  }

  /** The full URL of an API path such as `relays/invoice`. */
  url(path: string, query?: Record<string, string>): string {
    const base = URLExt.join(this.settings.baseUrl, API_PATH, path);
    const all = this.workspace !== null ? { workspace: this.workspace, ...query } : query;
    return all ? base + URLExt.objectToQueryString(all) : base;
  }

  /** Describe a workspace without switching to it: `undefined` the one requests go to now,
   * `null` the server's own, else that folder. */
  describeWorkspace(workspace?: string | null): Promise<WorkspaceInfo> {
    const query = workspace === undefined ? undefined : { workspace: workspace ?? '' };
    return this.request<WorkspaceInfo>('GET', 'workspace', undefined, query);
  }

  async request<T>(method: string, path: string, body?: unknown, query?: Record<string, string>) {
    const init: RequestInit = { method };
    if (body !== undefined) {
      init.body = JSON.stringify(body);
      init.headers = { 'Content-Type': 'application/json' };
    }
    const url = this.url(path, query);
    let response: Response;
    try {
      response = await ServerConnection.makeRequest(url, init, this.settings);
    } catch (error) {
      throw new RelayApiUnavailableError(
        `Cannot reach the Jupyter server at ${this.settings.baseUrl} (${String(error)}).`,
        'network-error',
        0
      );
    }
    const raw = await response.text();
    let data: unknown = null;
    try {
      data = raw ? JSON.parse(raw) : null;
    } catch {
      data = null;
    }
    if (response.ok) {
      return data as T;
    }
    const error = (data as { error?: { code?: string; message?: string } } | null)?.error;
    if (response.status === 404 && (!error || error.code === 'route-not-found')) {
      throw new RelayApiUnavailableError(
        `${method} ${url} answered 404, so this Jupyter server does not serve it. Enable ` +
          'the server extension with: jupyter server extension enable relay_notebook.server ' +
          '(then restart JupyterLab).',
        'api-unavailable',
        404
      );
    }
    throw new RelayApiError(
      error?.message ?? `${method} ${url} failed with HTTP ${response.status}.`,
      error?.code ?? 'http-error',
      response.status
    );
  }

  listRelays(): Promise<RelaySummary[]> {
    return this.request<RelaySummary[]>('GET', 'relays');
  }

  getRelay(name: string): Promise<RelayDetail> {
    return this.request<RelayDetail>('GET', `relays/${encodeURIComponent(name)}`);
  }

  listRuns(relay?: string): Promise<RunRow[]> {
    return this.request<RunRow[]>('GET', 'runs', undefined, relay ? { relay } : undefined);
  }

  getRun(runId: string): Promise<RunDetail> {
    return this.request<RunDetail>('GET', `runs/${encodeURIComponent(runId)}`);
  }

  /** Start a run of the draft; `crash` is a crash spec such as `after:extract_invoice`. */
  startRun(
    relay: string,
    input: unknown,
    crash: string | null = null
  ): Promise<{ run_id: string; status: string }> {
    return this.request('POST', `relays/${encodeURIComponent(relay)}/runs`, { input, crash });
  }

  recoverRun(runId: string): Promise<{ run_id: string; status: string }> {
    return this.request('POST', `runs/${encodeURIComponent(runId)}/recover`, {});
  }

  /** Fork a run from a call (`STEP#N`): earlier calls copied, the rest run fresh. */
  forkRun(
    runId: string,
    from: string,
    draft = false
  ): Promise<{ run_id: string; status: string }> {
    return this.request('POST', `runs/${encodeURIComponent(runId)}/fork`, { from, draft });
  }

  /** The fork tree `runId` belongs to. */
  getLineage(runId: string): Promise<LineageNode> {
    return this.request<LineageNode>('GET', `runs/${encodeURIComponent(runId)}/lineage`);
  }

  /** Delete a run (refused while it runs; its release stays). */
  deleteRun(runId: string): Promise<{ deleted: string; target: string }> {
    return this.request('DELETE', `runs/${encodeURIComponent(runId)}`);
  }
}
