/** Serialized (UTF-8 JSON) size limit of what an agent reports as a device's metadata. */
export const METADATA_MAX_BYTES = 16 * 1024;
/** Nesting limit of metadata: the top-level object is depth 1. */
export const METADATA_MAX_DEPTH = 8;

/**
 * Whether a parsed JSON value nests objects or arrays deeper than `maxDepth` (the value itself is depth 1).
 * Iterative and stopping at the first level too deep: hostile input (32,000 levels, which JSON.parse takes)
 * must not exhaust the stack here, nor reach a recursive JSON.stringify.
 */
export function nestsDeeperThan(value: unknown, maxDepth: number): boolean {
  const pending: Array<{ value: unknown; depth: number }> = [{ value, depth: 1 }];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    if (next.value === null || typeof next.value !== 'object') continue;
    if (next.depth > maxDepth) return true;
    for (const child of Object.values(next.value)) pending.push({ value: child, depth: next.depth + 1 });
  }
  return false;
}
