import { loadConfig } from '@sts/config/load-config';
import { createLogger } from '@sts/logger/create-logger';
import { connectJetStream } from '@sts/nats/jetstream-connection';
import { natsSetupEnvSchema } from '@sts/nats/nats-setup-config';
import { provisionNatsTopology } from '@sts/nats/nats-topology';
import { runProcess } from '@sts/runtime/lifecycle';

/**
 * `node dist/apps/nats-setup/main.js`: with NATS_URL naming the admin user, makes or updates every
 * stream, durable consumer and key-value bucket of NATS_NAMESPACE, then exits. The services' own users
 * may not (docs/decisions.md, "Trust model"), so a release runs this before they start. Takes the
 * analytics service's TELEMETRY_* settings, which the telemetry stream and its consumer carry.
 */
runProcess('nats-setup', async () => {
  const config = loadConfig(natsSetupEnvSchema);
  const logger = createLogger('nats-setup', config.LOG_LEVEL);
  // Waits (NATS_READY_TIMEOUT_MS) for a restarted cluster's meta leader, then for each stream's: a Job that
  // runs before the services may meet a cluster that is still electing them.
  const nats = await connectJetStream({
    url: config.NATS_URL,
    name: 'nats-setup',
    logger,
    readyTimeoutMs: config.NATS_READY_TIMEOUT_MS,
  });
  try {
    await nats.untilAnswers(`the streams, consumers and buckets of namespace ${config.NATS_NAMESPACE}`, () =>
      provisionNatsTopology(
        nats.nc,
        nats.jsm,
        {
          namespace: config.NATS_NAMESPACE,
          replicas: config.NATS_STREAM_REPLICAS,
          telemetryMaxBytes: config.TELEMETRY_STREAM_MAX_BYTES,
          telemetryConsumers: {
            'analytics-telemetry': {
              ackWaitMs: config.TELEMETRY_ACK_WAIT_MS,
              maxBatchMessages: config.TELEMETRY_BATCH_MESSAGES,
            },
          },
        },
        logger,
      ),
    );
  } catch (error) {
    await nats.close();
    throw error;
  }
  logger.info({ namespace: config.NATS_NAMESPACE }, 'NATS streams, consumers and buckets are in place');
  return { logger, stop: () => nats.close(), finished: true };
});
