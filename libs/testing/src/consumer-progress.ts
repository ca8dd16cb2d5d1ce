import type { JetStreamManager } from '@nats-io/jetstream';

/**
 * Whether the durable `consumer` of `stream` has been delivered and has acknowledged every message it
 * selects that the stream holds now (and, with `throughSeq`, the message at that stream sequence). Its
 * handlers acknowledge after their effect committed, so once this holds, every effect of those messages
 * is visible: the way to prove that something did not happen, with `eventually`, instead of a sleep.
 */
export async function consumerCaughtUp(
  jsm: JetStreamManager,
  stream: string,
  consumer: string,
  throughSeq = 0,
): Promise<boolean> {
  const info = await jsm.consumers.info(stream, consumer);
  return info.num_pending === 0 && info.num_ack_pending === 0 && info.ack_floor.stream_seq >= throughSeq;
}
