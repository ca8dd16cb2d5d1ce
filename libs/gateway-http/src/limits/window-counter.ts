import { createHash } from 'node:crypto';

export interface WindowCount {
  /** Count of the key in the current window (after this call's increment, for `increment`). */
  count: number;
  /** Milliseconds until the window ends. */
  resetInMs: number;
}

/**
 * Counts per key in fixed windows (whole multiples of `windowMs` since the epoch), for rate limits.
 * `scope` separates what is counted (a route, enrollment failures); it is a short name of letters,
 * digits, `-` and `_`. Keys may be secrets or addresses: implementations keep only their hash.
 *
 * `enough` is the count beyond which the caller's answer no longer changes (its limit): counts only
 * grow within a window, so once one is known to have reached it a shared counter need not be asked.
 * `amount` is what one increment adds (1: requests; a body's length: bytes), a positive safe integer.
 * Never rejects: a counter that cannot reach its shared store answers from what this process knows.
 */
export interface WindowCounter {
  increment(
    scope: string,
    key: string,
    windowMs: number,
    enough?: number,
    amount?: number,
  ): Promise<WindowCount>;
  read(scope: string, key: string, windowMs: number, enough?: number): Promise<WindowCount>;
}

/** Checks what an increment adds: a programming error otherwise, not a client's. */
export function checkAmount(amount: number): number {
  if (!(Number.isSafeInteger(amount) && amount > 0)) throw new Error(`invalid counter amount ${amount}`);
  return amount;
}

const SCOPE = /^[A-Za-z0-9_-]{1,64}$/;

/** What a process knows of one key in one window. */
export interface WindowEntry {
  /** The count as far as this process knows: the shared count it last saw plus its own since. */
  count: number;
  /** The shared count at `revision` (0: none seen). */
  shared: number;
  /** Revision of the shared counter last seen (0: none). */
  revision: number;
}

export interface WindowCell {
  entry: WindowEntry;
  /** `<scope>.<windowMs>.<window number>.<hash of the key>`: a valid NATS KV key without the key itself. */
  id: string;
  resetInMs: number;
}

/**
 * The entries of the current window of each scope; an entry of an earlier window is dropped when its
 * scope's next window starts, so memory holds one window's keys.
 */
export class WindowTable {
  private readonly windows = new Map<string, { number: number; entries: Map<string, WindowEntry> }>();

  constructor(private readonly now: () => number) {}

  cell(scope: string, key: string, windowMs: number): WindowCell {
    if (!SCOPE.test(scope)) throw new Error(`invalid counter scope "${scope}"`);
    if (!(Number.isSafeInteger(windowMs) && windowMs > 0)) throw new Error(`invalid window ${windowMs}`);
    const now = this.now();
    const number = Math.floor(now / windowMs);
    const name = `${scope}.${windowMs}`;
    let window = this.windows.get(name);
    if (!window || window.number !== number) {
      window = { number, entries: new Map() };
      this.windows.set(name, window);
    }
    const id = `${name}.${number}.${digest(scope, key)}`;
    let entry = window.entries.get(id);
    if (!entry) {
      entry = { count: 0, shared: 0, revision: 0 };
      window.entries.set(id, entry);
    }
    return { entry, id, resetInMs: (number + 1) * windowMs - now };
  }
}

/** A counter of this process alone: for one gateway (tests) and what the shared counter falls back on. */
export class LocalWindowCounter implements WindowCounter {
  private readonly table: WindowTable;

  constructor(now: () => number = Date.now) {
    this.table = new WindowTable(now);
  }

  increment(
    scope: string,
    key: string,
    windowMs: number,
    _enough?: number,
    amount = 1,
  ): Promise<WindowCount> {
    const { entry, resetInMs } = this.table.cell(scope, key, windowMs);
    entry.count += checkAmount(amount);
    return Promise.resolve({ count: entry.count, resetInMs });
  }

  read(scope: string, key: string, windowMs: number): Promise<WindowCount> {
    const { entry, resetInMs } = this.table.cell(scope, key, windowMs);
    return Promise.resolve({ count: entry.count, resetInMs });
  }
}

/** SHA-256 in base64url (letters, digits, - and _: valid in a NATS KV key), cut to 192 bits. */
function digest(scope: string, key: string): string {
  return createHash('sha256').update(scope).update('\0').update(key).digest('base64url').slice(0, 32);
}
