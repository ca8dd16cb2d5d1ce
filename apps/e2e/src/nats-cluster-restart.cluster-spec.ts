import { resolve } from 'node:path';
import { eventsStreamName } from '@sts/events/subjects';
import { createLogger } from '@sts/logger/create-logger';
import { connectJetStream } from '@sts/nats/jetstream-connection';
import { clusterNode, localCluster, natsClusterUrl } from '@sts/testing/local-cluster';
import { deleteNamespaceStreams, uniqueNatsNamespace } from '@sts/testing/nats-namespace';
import { ServiceProcess } from '@sts/testing/service-process';

const ROOT = resolve(__dirname, '../../..');
const CYCLES = 3;
const EVENTS = 20;

/**
 * The three-node JetStream stopped whole and started again node by node, as after a reboot or a
 * `STS_CLUSTER=1 npm start` stopped and started again: nats-setup, started while only one node is up (no
 * meta leader can be elected), waits for the cluster instead of giving up, and then finds every stream with
 * its messages.
 */
describe('a NATS cluster stopped and started again (NATS x3)', () => {
  const logger = createLogger('nats-cluster-restart', 'silent');
  const namespace = uniqueNatsNamespace('restart');
  const nodes = localCluster().nats.nodes.map((node) => node.name);

  const natsSetup = () =>
    new ServiceProcess(
      'nats-setup',
      ['--import', 'tsx', 'apps/nats-setup/src/main.ts'],
      {
        ...(process.env as Record<string, string>),
        NODE_ENV: 'test',
        LOG_LEVEL: 'info',
        NATS_URL: natsClusterUrl(),
        NATS_NAMESPACE: namespace,
        NATS_STREAM_REPLICAS: String(nodes.length),
      },
      ROOT,
    );

  const storedEvents = async (): Promise<number> => {
    const nats = await connectJetStream({ url: natsClusterUrl(), name: 'nats-cluster-restart-test', logger });
    try {
      return (await nats.jsm.streams.info(eventsStreamName(namespace))).state.messages;
    } finally {
      await nats.close();
    }
  };

  afterAll(async () => {
    await Promise.all(nodes.map((node) => clusterNode('start', node)));
    const nats = await connectJetStream({
      url: natsClusterUrl(),
      name: 'nats-cluster-restart-cleanup',
      logger,
    });
    await deleteNamespaceStreams(nats.jsm, namespace);
    await nats.close();
  }, 300_000);

  it(`waits for the restarted cluster's leaders and keeps every message, ${CYCLES} times in a row`, async () => {
    expect(await natsSetup().finished(120_000)).toBe('code 0');
    const nats = await connectJetStream({ url: natsClusterUrl(), name: 'nats-cluster-restart-test', logger });
    for (let i = 0; i < EVENTS; i++)
      await nats.js.publish(`${namespace}.events.test.restarted`, JSON.stringify({ i }), {
        msgID: `event-${i}`,
      });
    await nats.close();
    expect(await storedEvents()).toBe(EVENTS);

    for (let cycle = 1; cycle <= CYCLES; cycle++) {
      await Promise.all(nodes.map((node) => clusterNode('stop', node)));
      // One node alone cannot elect a meta leader: nats-setup must wait, and say what for.
      const [first, ...rest] = nodes;
      const firstStarted = clusterNode('start', first!);
      const setup = natsSetup();
      await setup.waitUntil(
        'a line saying it waits for JetStream',
        async () => setup.tail(100).includes('waiting for JetStream'),
        90_000,
      );
      await Promise.all([firstStarted, ...rest.map((node) => clusterNode('start', node))]);
      const ended = await setup.finished(180_000);
      expect({ cycle, ended, log: ended === 'code 0' ? '' : setup.tail() }).toEqual({
        cycle,
        ended: 'code 0',
        log: '',
      });
      expect({ cycle, events: await storedEvents() }).toEqual({ cycle, events: EVENTS });
    }
  }, 900_000);
});
