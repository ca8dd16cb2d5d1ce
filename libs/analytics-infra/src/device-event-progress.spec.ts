import type { ConsumerInfo, JetStreamManager } from '@nats-io/jetstream';
import { DEVICE_EVENTS_CONSUMER, deviceEventProgress } from './device-event-progress';

/** The server's information on the consumer, as the test sets it; `asked` lists the questions. */
function fakeServer() {
  const server = {
    pending: 0,
    ackPending: 0,
    failing: false,
    asked: [] as [string, string][],
  };
  const jsm = {
    consumers: {
      info: async (stream: string, consumer: string) => {
        server.asked.push([stream, consumer]);
        if (server.failing) throw new Error('NATS is away');
        return { num_pending: server.pending, num_ack_pending: server.ackPending } as ConsumerInfo;
      },
    },
  } as unknown as JetStreamManager;
  return { server, jsm };
}

describe('deviceEventProgress', () => {
  let now = 1_000_000;
  const clock = () => now;

  it("answers when analytics' device-event consumer was last seen with nothing pending or unacknowledged", async () => {
    const { server, jsm } = fakeServer();
    const progress = deviceEventProgress({ jsm, namespace: 'ns', now: clock });
    server.pending = 2;
    expect(await progress.appliedUntil()).toBeNull();
    expect(server.asked).toEqual([['NS_EVENTS', DEVICE_EVENTS_CONSUMER]]);

    now += 1_000;
    server.pending = 0;
    server.ackPending = 1;
    expect(await progress.appliedUntil()).toBeNull();

    now += 1_000;
    server.ackPending = 0;
    const caughtUpAt = now;
    expect(await progress.appliedUntil()).toBe(caughtUpAt);

    // Behind again: what was applied then still is.
    now += 1_000;
    server.pending = 1;
    expect(await progress.appliedUntil()).toBe(caughtUpAt);
  });

  it('asks the server at most once a second, and answers what it knew when the server does not answer', async () => {
    const { server, jsm } = fakeServer();
    const progress = deviceEventProgress({ jsm, namespace: 'ns', now: clock });
    const first = now;
    await Promise.all([progress.appliedUntil(), progress.appliedUntil()]);
    now += 999;
    expect(await progress.appliedUntil()).toBe(first);
    expect(server.asked).toHaveLength(1);

    now += 1;
    server.failing = true;
    expect(await progress.appliedUntil()).toBe(first);
    expect(server.asked).toHaveLength(2);
    server.failing = false;
    expect(await progress.appliedUntil()).toBe(now);
    expect(server.asked).toHaveLength(3);
  });
});
