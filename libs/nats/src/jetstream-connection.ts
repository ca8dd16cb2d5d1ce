import { setTimeout as sleep } from 'node:timers/promises';
import { jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection, type NodeConnectionOptions } from '@nats-io/transport-node';
import type { Logger } from '@sts/logger/create-logger';
import { untilJetStreamAnswers } from './jetstream-availability';
import { natsInboxPrefix } from './nats-permissions';

export interface JetStreamConnection {
  readonly nc: NatsConnection;
  readonly js: JetStreamClient;
  readonly jsm: JetStreamManager;
  /** Whether the server answers a round trip now (readiness checks). */
  answers(): Promise<boolean>;
  /**
   * Runs an idempotent JetStream API call until a restarted cluster has the leaders to answer it, for at most
   * the connection's ready timeout; the log says what it waits for.
   */
  untilAnswers<T>(what: string, action: () => Promise<T>): Promise<T>;
  /** Drains subscriptions and pending publishes/acks, then closes. Safe to call twice. */
  close(): Promise<void>;
}

export interface ConnectJetStreamOptions {
  /** `nats://[user:pass@]host:port` or `tls://…` (several comma-separated URLs form a cluster pool). */
  url: string;
  /** Client name shown in the server's monitoring pages (e.g. the service name). */
  name: string;
  logger: Logger;
  /** How long to keep trying the first connection before giving up (default 30 s). */
  initialConnectTimeoutMs?: number;
  /** Milliseconds between reconnect attempts once connected (default 1 s, plus up to 1 s jitter). */
  reconnectTimeWaitMs?: number;
  /**
   * How long to wait, once connected, for JetStream to answer (a restarted cluster elects its meta leader
   * first; default 120 s, NATS_READY_TIMEOUT_MS).
   */
  readyTimeoutMs?: number;
}

/**
 * Connects to NATS and opens JetStream. Once connected, the client reconnects forever (a NATS
 * restart or a network blip never ends the process); the first connection is retried for a bounded
 * time so that a wrong URL still fails the start with a clear error.
 */
export async function connectJetStream(options: ConnectJetStreamOptions): Promise<JetStreamConnection> {
  const { logger } = options;
  const connectOptions = toConnectionOptions(options);
  const deadline = Date.now() + (options.initialConnectTimeoutMs ?? 30_000);
  // Hosts only: the credentials of the URL go in separate fields.
  const { servers } = connectOptions;

  let nc: NatsConnection;
  for (let attempt = 1; ; attempt++) {
    try {
      nc = await connect(connectOptions);
      break;
    } catch (error) {
      if (Date.now() >= deadline) {
        logger.error({ err: error, servers, attempt }, 'could not connect to NATS');
        throw error;
      }
      logger.warn({ err: error, servers, attempt }, 'NATS not reachable yet, retrying');
      await sleep(Math.min(1_000 * attempt, 5_000));
    }
  }

  logger.info({ server: nc.getServer(), version: nc.info?.version }, 'connected to NATS');
  const statusLoop = logStatus(nc, logger);
  void nc.closed().then((error) => {
    if (error) logger.error({ err: error }, 'NATS connection closed with an error');
    else logger.info('NATS connection closed');
  });

  const wait = { logger, timeoutMs: options.readyTimeoutMs ?? 120_000 };
  let jsm: JetStreamManager;
  try {
    jsm = await jetstreamManager(nc, { checkAPI: false });
    await untilJetStreamAnswers(
      'the JetStream API of this account (its meta leader)',
      () => jsm.getAccountInfo(),
      wait,
    );
  } catch (error) {
    await nc.close();
    throw error;
  }
  const js = jetstream(nc);

  let closing: Promise<void> | undefined;
  return {
    nc,
    js,
    jsm,
    answers: async () => !nc.isClosed() && (await nc.rtt()) >= 0,
    untilAnswers: (what, action) => untilJetStreamAnswers(what, action, wait),
    close: () => {
      closing ??= (async () => {
        if (!nc.isClosed()) {
          try {
            await nc.drain();
          } catch (error) {
            logger.warn({ err: error }, 'NATS drain failed, closing');
            await nc.close();
          }
        }
        await statusLoop;
      })();
      return closing;
    },
  };
}

function toConnectionOptions(options: ConnectJetStreamOptions): NodeConnectionOptions {
  const urls = options.url
    .split(',')
    .map((value) => value.trim())
    .filter(Boolean)
    .map((value) => new URL(value));
  const first = urls[0];
  if (!first) throw new Error('NATS URL is empty');

  const connectOptions: NodeConnectionOptions = {
    servers: urls.map((url) => url.host),
    name: options.name,
    reconnect: true,
    maxReconnectAttempts: -1,
    reconnectTimeWait: options.reconnectTimeWaitMs ?? 1_000,
    reconnectJitter: 1_000,
    reconnectJitterTLS: 1_000,
    // Notice a dead peer within about a minute rather than the default four.
    pingInterval: 20_000,
    maxPingOut: 3,
    timeout: 10_000,
  };
  if (urls.some((url) => url.protocol === 'tls:')) connectOptions.tls = {};
  if (first.username && first.password) {
    connectOptions.user = decodeURIComponent(first.username);
    connectOptions.pass = decodeURIComponent(first.password);
    // A user of its own gets replies under its own prefix, the only one it may subscribe to.
    if (/^[A-Za-z0-9_-]+$/.test(connectOptions.user))
      connectOptions.inboxPrefix = natsInboxPrefix(connectOptions.user);
  } else if (first.username) {
    connectOptions.token = decodeURIComponent(first.username);
  }
  return connectOptions;
}

async function logStatus(nc: NatsConnection, logger: Logger): Promise<void> {
  for await (const status of nc.status()) {
    switch (status.type) {
      case 'disconnect':
        logger.warn({ server: status.server }, 'NATS disconnected');
        break;
      case 'reconnecting':
        logger.debug('NATS reconnecting');
        break;
      case 'reconnect':
        logger.info({ server: status.server }, 'NATS reconnected');
        break;
      case 'error':
        logger.error({ err: status.error }, 'NATS connection error');
        break;
      case 'ldm':
        logger.warn({ server: status.server }, 'NATS server entering lame duck mode');
        break;
      case 'staleConnection':
        logger.warn('NATS connection is stale, reconnecting');
        break;
      case 'slowConsumer':
        logger.warn({ subject: status.sub.getSubject(), pending: status.pending }, 'NATS slow consumer');
        break;
      case 'update':
        logger.debug({ added: status.added, deleted: status.deleted }, 'NATS cluster servers changed');
        break;
      default:
        // ping, forceReconnect, close: nothing worth a log line.
        break;
    }
  }
}
