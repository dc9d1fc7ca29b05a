/**
 * How a rendered output reaches its notebook's kernel: the plugin (which has the application
 * shell) registers a finder; the MIME renderer (which gets no kernel of its own) asks it for the
 * kernel of the notebook its node sits in. Both entry points share this module.
 */

/** The part of a kernel connection the run view's buttons use (a comm per action). */
export interface CommLike {
  open(data?: unknown): unknown;
  send(data: unknown): unknown;
  close(data?: unknown): unknown;
  onMsg: (msg: { content: { data: unknown } }) => void;
  onClose: (msg: unknown) => void;
}

export interface KernelLike {
  createComm(targetName: string): CommLike;
  readonly status?: string;
}

export type KernelFinder = (node: HTMLElement) => KernelLike | null;

const KEY = '__relayNotebookKernelFinder';

/** Register how to find the kernel of the notebook an element is in. */
export function setKernelFinder(finder: KernelFinder): void {
  (globalThis as Record<string, unknown>)[KEY] = finder;
}

/** The kernel of the notebook `node` is in, or null (no notebook, no kernel, no plugin). */
export function findKernel(node: HTMLElement): KernelLike | null {
  const finder = (globalThis as Record<string, unknown>)[KEY] as KernelFinder | undefined;
  return finder ? finder(node) : null;
}

/** Close `comm` if it is still open: closing one the kernel already closed (its target was not
 * registered yet: no %load_ext), or one of a kernel since replaced, throws. */
export function closeQuietly(comm: Pick<CommLike, 'close'> | null): void {
  try {
    comm?.close();
  } catch {
    // already closed: nothing to do
  }
}
