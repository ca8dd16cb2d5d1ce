import {
  AckPolicy,
  DeliverPolicy,
  JetStreamApiError,
  type ConsumerConfig,
  type ConsumerInfo,
  type JetStreamManager,
} from '@nats-io/jetstream';
import { InvalidArgumentError, nanos } from '@nats-io/nats-core';
import type { Logger } from '@sts/logger/create-logger';
import { isPermissionDenied, NatsProvisioningRequiredError } from './provisioning-errors';

/** What a durable pull consumer is: every process sharing `durableName` shares its messages. */
export interface DurableConsumerSpec {
  stream: string;
  durableName: string;
  /** The subjects it takes. Several need NATS 2.10; older servers get `fallbackFilterSubject`. */
  filterSubjects: readonly string[];
  /** A subject covering all of `filterSubjects`, for servers before 2.10 (the caller skips the rest). */
  fallbackFilterSubject?: string;
  /** Where a newly created consumer starts: every retained message (default) or only new ones. */
  deliverPolicy?: 'all' | 'new';
  ackWaitMs: number;
  /** Deliveries of a message before the server stops offering it; -1 for no limit. */
  maxDeliver: number;
  /** Delivered but unacknowledged messages at most, across every process. */
  maxAckPending: number;
  /** Deliver the headers only (for consumers that read nothing else). */
  headersOnly?: boolean;
}

/** Messages per batch a consumer takes unless told otherwise. */
export const DEFAULT_MAX_BATCH_MESSAGES = 200;

/** Enough pulled-but-unacknowledged messages for every process's batch and the next one. */
export function maxAckPendingFor(maxBatchMessages: number): number {
  return Math.max(1_000, maxBatchMessages * 8);
}

/** JetStream API error codes (nats-server `server/errors.json`). */
const CONSUMER_NOT_FOUND = 10014;
const CONSUMER_NAME_EXISTS = 10013;
const CONSUMER_ALREADY_EXISTS = 10148;

function isConsumerNotFound(error: unknown): boolean {
  return error instanceof JetStreamApiError && error.code === CONSUMER_NOT_FOUND;
}

function isConsumerExists(error: unknown): boolean {
  return (
    error instanceof JetStreamApiError &&
    (error.code === CONSUMER_ALREADY_EXISTS || error.code === CONSUMER_NAME_EXISTS)
  );
}

/**
 * Makes sure the durable consumer exists. With `reconcile` (at start) it also brings an existing one to
 * the spec; when recovering from a vanished consumer it only recreates a missing one, so that
 * processes of two versions during a rolling deploy do not keep replacing each other's consumer.
 */
export async function ensureDurableConsumer(
  jsm: JetStreamManager,
  spec: DurableConsumerSpec,
  logger: Logger,
  reconcile: boolean,
): Promise<void> {
  const { stream, durableName } = spec;
  const subjects = [...spec.filterSubjects].sort();
  const base: Partial<ConsumerConfig> = {
    durable_name: durableName,
    ack_policy: AckPolicy.Explicit,
    deliver_policy: spec.deliverPolicy === 'new' ? DeliverPolicy.New : DeliverPolicy.All,
    ack_wait: nanos(spec.ackWaitMs),
    max_deliver: spec.maxDeliver,
    max_ack_pending: spec.maxAckPending,
    ...(spec.headersOnly ? { headers_only: true } : {}),
  };

  async function create(extra: Partial<ConsumerConfig>): Promise<void> {
    const config = { ...base, ...extra };
    if (subjects.length === 1) {
      await jsm.consumers.add(stream, { ...config, filter_subject: subjects[0] });
      return;
    }
    try {
      await jsm.consumers.add(stream, { ...config, filter_subjects: subjects });
    } catch (error) {
      // Servers before 2.10 take one filter subject only (the client refuses before asking).
      const tooOld = error instanceof InvalidArgumentError && error.message.includes('filter_subjects');
      if (!tooOld || !spec.fallbackFilterSubject) throw error;
      logger.debug('server lacks filter_subjects; filtering subjects in the client');
      await jsm.consumers.add(stream, { ...config, filter_subject: spec.fallbackFilterSubject });
    }
  }

  function filterMatches(config: ConsumerConfig): boolean {
    const current = config.filter_subjects?.length
      ? [...config.filter_subjects].sort()
      : config.filter_subject
        ? [config.filter_subject]
        : [];
    if (current.length === subjects.length && current.every((subject, i) => subject === subjects[i]))
      return true;
    return subjects.length > 1 && current.length === 1 && current[0] === spec.fallbackFilterSubject;
  }

  let existing: ConsumerInfo | undefined;
  try {
    existing = await jsm.consumers.info(stream, durableName);
  } catch (error) {
    if (!isConsumerNotFound(error)) throw error;
  }
  const what = `consumer ${durableName} of stream ${stream}`;
  if (!existing) {
    try {
      await create({});
    } catch (error) {
      if (isPermissionDenied(error))
        throw new NatsProvisioningRequiredError(`${what} does not exist`, { cause: error });
      // A twin process created it a moment ago: fine.
      if (!isConsumerExists(error)) throw error;
    }
    return;
  }
  if (!reconcile) return;
  if (
    !filterMatches(existing.config) ||
    Boolean(existing.config.headers_only) !== Boolean(spec.headersOnly)
  ) {
    // Changing a live consumer's filter is unreliable across server versions (2.9 skips messages
    // after such an update), so start a new consumer where the old one had got to.
    const fromSeq = existing.ack_floor.stream_seq + 1;
    logger.info(
      { from_stream_seq: fromSeq },
      'subjects or headers-only changed; recreating the consumer from its acknowledged position',
    );
    try {
      await jsm.consumers.delete(stream, durableName).catch((error: unknown) => {
        if (!isConsumerNotFound(error)) throw error;
      });
      await create({ deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: fromSeq });
    } catch (error) {
      if (isPermissionDenied(error))
        throw new NatsProvisioningRequiredError(`${what} takes other subjects than this release`, {
          cause: error,
        });
      throw error;
    }
    return;
  }
  const { config } = existing;
  if (
    config.ack_wait !== base.ack_wait ||
    config.max_deliver !== base.max_deliver ||
    config.max_ack_pending !== base.max_ack_pending
  ) {
    try {
      await jsm.consumers.update(stream, durableName, {
        ack_wait: base.ack_wait,
        max_deliver: base.max_deliver,
        max_ack_pending: base.max_ack_pending,
      });
    } catch (error) {
      if (!isPermissionDenied(error)) throw error;
      // Works as it is; the provisioning step owns these settings where services may not change them.
      logger.warn(
        {
          ack_wait: config.ack_wait,
          max_deliver: config.max_deliver,
          max_ack_pending: config.max_ack_pending,
        },
        "consumer settings differ from this process's and this NATS user may not change them; nats-setup applies them",
      );
    }
  }
}
