/**
 * Thrown by an event handler for an event that can never be handled, however often it is delivered
 * (a sealed secret that does not open for this event's recipient, say). The consumer terminates it
 * at once and logs it, instead of retrying it until it gives up.
 */
export class UnprocessableEventError extends Error {
  override readonly name = 'UnprocessableEventError';
}
