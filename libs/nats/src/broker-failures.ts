import {
  ClosedConnectionError,
  ConnectionError,
  DrainingConnectionError,
  NoRespondersError,
  RequestError,
  TimeoutError,
} from '@nats-io/nats-core';

/**
 * Whether a publish failed for the broker's sake, not the message's: nobody took the subject (a JetStream
 * cluster electing a stream's leader after a server died answers "no responders" for a few seconds), no
 * answer in time, or the connection gone or draining. Such a failure says nothing of the message, so it
 * must never count against it (the outbox parks a message only for failures of its own).
 */
export function isBrokerUnavailable(error: unknown): boolean {
  let current: unknown = error;
  for (let depth = 0; current instanceof Error && depth < 5; depth++) {
    if (
      current instanceof NoRespondersError ||
      current instanceof TimeoutError ||
      current instanceof ClosedConnectionError ||
      current instanceof DrainingConnectionError ||
      current instanceof ConnectionError ||
      current instanceof RequestError ||
      // @nats-io/jetstream's wrapper of "no responders" on a publish (not exported by name).
      current.name === 'JetStreamNotEnabled'
    )
      return true;
    current = current.cause;
  }
  return false;
}
