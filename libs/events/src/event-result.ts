/**
 * What became of one event of a batch that a handler took at once: an outcome for the log (e.g.
 * `'applied'`, `'duplicate'`), or why it failed (retried later, unless an `UnprocessableEventError`).
 */
export type EventResult = { outcome?: string } | { error: unknown };
