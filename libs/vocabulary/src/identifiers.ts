const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * Whether a value has the shape of our ids (UUIDs, any version). Ids are opaque to clients; anything
 * else cannot name a row of ours, and must not reach SQL as a uuid.
 */
export function isUuid(value: string): boolean {
  return UUID_PATTERN.test(value);
}
