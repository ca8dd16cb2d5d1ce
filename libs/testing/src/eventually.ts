import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Polls `probe` (sync or async) every 50 ms until it returns something other than `undefined` or
 * `false`, and returns that; throws when `timeoutMs` passes first. For effects that land
 * asynchronously (an event consumed, a row written, a mail received).
 */
export async function eventually<T>(
  probe: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs = 10_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await sleep(50);
  }
}
