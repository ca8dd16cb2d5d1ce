/**
 * What may be logged of a failure from a database or a driver: its class, code and type, never its
 * message. ClickHouse echoes the failing query in it, and with it the values (URLs, hosts, ids) the query
 * carried; PostgreSQL the duplicate key. No log line or trace may carry those.
 */
export function redactedError(error: unknown): { name: string; code?: string; type?: string } {
  if (!(error instanceof Error)) return { name: typeof error };
  const { code, type } = error as { code?: unknown; type?: unknown };
  return {
    name: error.name,
    ...(typeof code === 'string' || typeof code === 'number' ? { code: String(code) } : {}),
    ...(typeof type === 'string' ? { type } : {}),
  };
}
