import { setTimeout as sleep } from 'node:timers/promises';
import {
  AckPolicy,
  DeliverPolicy,
  JetStreamApiError,
  type ConsumerMessages,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
} from '@nats-io/jetstream';
import { ClosedConnectionError, DrainingConnectionError, nanos } from '@nats-io/nats-core';
import type { Logger } from '@sts/logger/create-logger';

/** A message and what `decode` made of it. */
export interface Decoded<T> {
  msg: JsMsg;
  value: T;
}

export interface BatchConsumerOptions<T> {
  js: JetStreamClient;
  jsm: JetStreamManager;
  stream: string;
  /** Creates or updates the stream (called at start and when the stream vanished). */
  ensureStream: () => Promise<unknown>;
  /** Durable consumer name; processes sharing it share the work. */
  durableName: string;
  filterSubject: string;
  /**
   * Turns a message into the handler's input. Throwing marks the message poison: it is terminated
   * (never redelivered) and logged without its content.
   */
  decode: (msg: JsMsg) => T;
  /**
   * Handles a batch. Resolving acknowledges every message of it; throwing returns them all for
   * redelivery after a delay that grows with their delivery count. Delivery is at least once: the
   * handler must recognise what it already did.
   */
  handleBatch: (batch: Decoded<T>[]) => Promise<void>;
  logger: Logger;
  /** Messages per batch at most. Default 200. */
  maxBatchMessages?: number;
  /** How long the first message of a batch waits for more. Default 200 ms. */
  maxWaitMs?: number;
  /** The server redelivers a message not acknowledged in this time. Default 60 s (kept alive while handled). */
  ackWaitMs?: number;
  /** Delay before a failed batch comes back: doubles per delivery, up to the maximum. */
  retryDelay?: { initialMs?: number; maxMs?: number };
}

export interface BatchConsumer {
  /** Stops pulling, lets the batch in hand finish, returns pulled messages to the stream. */
  stop(): Promise<void>;
}

const CONSUMER_NOT_FOUND = 10014;
const CONSUMER_NAME_EXISTS = 10013;
const CONSUMER_ALREADY_EXISTS = 10148;

/**
 * A durable pull consumer that hands messages to its handler in batches: as many as arrive within
 * `maxWaitMs` of the first, up to `maxBatchMessages`. Batches are handled one at a time per process;
 * several processes on the same durable split the stream between them. Nothing is given up: a batch
 * whose handler fails comes back until it succeeds (only undecodable messages are terminated).
 */
export async function startBatchConsumer<T>(options: BatchConsumerOptions<T>): Promise<BatchConsumer> {
  const { js, jsm, stream, durableName } = options;
  const logger = options.logger.child({ stream, consumer: durableName });
  const maxBatch = options.maxBatchMessages ?? 200;
  const maxWaitMs = options.maxWaitMs ?? 200;
  const ackWaitMs = options.ackWaitMs ?? 60_000;
  const retryInitialMs = options.retryDelay?.initialMs ?? 1_000;
  const retryMaxMs = options.retryDelay?.maxMs ?? 30_000;

  async function ensureConsumer(): Promise<void> {
    await options.ensureStream();
    const config = {
      durable_name: durableName,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      ack_wait: nanos(ackWaitMs),
      max_deliver: -1,
      // Enough pulled-but-unacknowledged messages for every process's batch and the next one.
      max_ack_pending: Math.max(1_000, maxBatch * 8),
      filter_subject: options.filterSubject,
    };
    try {
      await jsm.consumers.info(stream, durableName);
      await jsm.consumers.update(stream, durableName, {
        ack_wait: config.ack_wait,
        max_deliver: config.max_deliver,
        max_ack_pending: config.max_ack_pending,
      });
    } catch (error) {
      if (!(error instanceof JetStreamApiError && error.code === CONSUMER_NOT_FOUND)) throw error;
      try {
        await jsm.consumers.add(stream, config);
      } catch (addError) {
        const exists =
          addError instanceof JetStreamApiError &&
          (addError.code === CONSUMER_ALREADY_EXISTS || addError.code === CONSUMER_NAME_EXISTS);
        if (!exists) throw addError;
      }
    }
  }

  function retryDelayMs(deliveryCount: number): number {
    const exponential = retryInitialMs * 2 ** Math.min(Math.max(deliveryCount - 1, 0), 20);
    return Math.round(Math.min(exponential, retryMaxMs) * (0.8 + Math.random() * 0.4));
  }

  async function handle(messages: JsMsg[]): Promise<void> {
    const batch: Decoded<T>[] = [];
    for (const msg of messages) {
      try {
        batch.push({ msg, value: options.decode(msg) });
      } catch (error) {
        logger.error(
          { seq: msg.seq, reason: error instanceof Error ? error.message : String(error) },
          'undecodable message terminated (it will not be redelivered)',
        );
        msg.term();
      }
    }
    if (batch.length === 0) return;
    const keepAlive = setInterval(
      () => batch.forEach(({ msg }) => msg.working()),
      Math.max(Math.floor(ackWaitMs / 3), 1_000),
    );
    try {
      await options.handleBatch(batch);
    } catch (error) {
      const delivery = Math.max(...batch.map(({ msg }) => msg.info.deliveryCount));
      const retryInMs = retryDelayMs(delivery);
      logger.warn(
        { err: error, messages: batch.length, delivery, retry_in_ms: retryInMs },
        'batch failed; will retry',
      );
      batch.forEach(({ msg }) => msg.nak(retryInMs));
      return;
    } finally {
      clearInterval(keepAlive);
    }
    batch.forEach(({ msg }) => msg.ack());
    logger.debug({ messages: batch.length }, 'batch handled');
  }

  await ensureConsumer();

  let stopping = false;
  let current: ConsumerMessages | undefined;
  const stopSignal = new AbortController();

  async function run(): Promise<void> {
    let failures = 0;
    let needsEnsure = false;
    while (!stopping) {
      let pending: JsMsg[] = [];
      let timer: NodeJS.Timeout | undefined;
      let inFlight: Promise<void> = Promise.resolve();
      // Batches run one after another, whether the size or the timer closed them.
      const flush = (): Promise<void> => {
        if (timer) clearTimeout(timer);
        timer = undefined;
        const taken = pending;
        pending = [];
        if (taken.length > 0) inFlight = inFlight.then(() => handle(taken));
        return inFlight;
      };
      try {
        if (needsEnsure) await ensureConsumer();
        needsEnsure = true;
        const consumer = await js.consumers.get(stream, durableName);
        if (stopping) break;
        const messages = await consumer.consume({
          max_messages: maxBatch * 2,
          abort_on_missing_resource: true,
        });
        current = messages;
        if (stopping) void messages.close();
        logger.info('consuming batches');
        for await (const msg of messages) {
          failures = 0;
          if (stopping) {
            msg.nak();
            continue;
          }
          pending.push(msg);
          if (pending.length >= maxBatch) await flush();
          else timer ??= setTimeout(() => void flush(), maxWaitMs);
        }
        await flush();
        const closedWith = await messages.closed();
        if (closedWith && !stopping) throw closedWith;
      } catch (error) {
        await flush().catch(() => undefined);
        if (stopping) break;
        if (error instanceof ClosedConnectionError || error instanceof DrainingConnectionError) {
          logger.warn('NATS connection closed; batch consumer stopped');
          break;
        }
        failures++;
        logger.warn({ err: error, attempt: failures }, 'batch consumer interrupted; restarting');
      }
      if (stopping) break;
      const waitMs = Math.min(250 * 2 ** Math.min(failures, 6), 10_000);
      await sleep(waitMs, undefined, { signal: stopSignal.signal }).catch(() => undefined);
    }
    current = undefined;
  }

  const running = run();
  let stopped: Promise<void> | undefined;
  return {
    stop: () => {
      stopped ??= (async () => {
        stopping = true;
        stopSignal.abort();
        void current?.close();
        await running;
        logger.info('batch consumer stopped');
      })();
      return stopped;
    },
  };
}
