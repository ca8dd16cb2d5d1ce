import { JetStreamApiError } from '@nats-io/jetstream';
import { NoRespondersError, PermissionViolationError, TimeoutError } from '@nats-io/nats-core';
import { createLogger } from '@sts/logger/create-logger';
import { failureOf } from '@sts/testing/failure-of';
import { isJetStreamElecting, untilJetStreamAnswers } from './jetstream-availability';

const logger = createLogger('jetstream-availability-spec', 'silent');
const apiError = (code: number, err_code: number) =>
  new JetStreamApiError({ code, err_code, description: 'from the server' });

describe('isJetStreamElecting', () => {
  it.each([
    ['a timeout (no meta leader to answer)', new TimeoutError()],
    ['no responders (a stream without a leader)', new NoRespondersError('$JS.API.STREAM.INFO.X')],
    ['503 JetStream system temporarily unavailable', apiError(503, 10008)],
    ['10008 under another status', apiError(500, 10008)],
    [
      'a timeout as the cause of another error',
      new Error('provisioning failed', { cause: new TimeoutError() }),
    ],
  ])('is true for %s', (_name, error) => {
    expect(isJetStreamElecting(error)).toBe(true);
  });

  it.each([
    ['a stream name in use with another configuration', apiError(400, 10058)],
    ['stream not found', apiError(404, 10059)],
    [
      'a permission violation',
      new PermissionViolationError('Permissions Violation for Publish', 'publish', '$JS.API.STREAM.CREATE.X'),
    ],
    ['a plain error', new Error('no')],
    ['not an error', 'timeout'],
  ])('is false for %s', (_name, error) => {
    expect(isJetStreamElecting(error)).toBe(false);
  });
});

describe('untilJetStreamAnswers', () => {
  it('tries again while the cluster elects, and answers what the call answers', async () => {
    const failures = [new TimeoutError(), apiError(503, 10008)];
    let calls = 0;
    const answer = await untilJetStreamAnswers(
      'a stream',
      async () => {
        calls++;
        const failure = failures.shift();
        if (failure) throw failure;
        return 'answered';
      },
      { logger, timeoutMs: 10_000, maxDelayMs: 1 },
    );
    expect([answer, calls]).toEqual(['answered', 3]);
  });

  it('fails at once on a refusal, without a second call', async () => {
    let calls = 0;
    const refusal = apiError(400, 10058);
    const error = await failureOf(
      untilJetStreamAnswers(
        'a stream',
        async () => {
          calls++;
          throw refusal;
        },
        { logger, timeoutMs: 10_000, maxDelayMs: 1 },
      ),
    );
    expect([error, calls]).toEqual([refusal, 1]);
  });

  it('gives up after its timeout with an error that names what it waited for, the last failure as its cause', async () => {
    const started = Date.now();
    let calls = 0;
    const error = await failureOf(
      untilJetStreamAnswers(
        'the events stream',
        async () => {
          calls++;
          throw new TimeoutError();
        },
        { logger, timeoutMs: 300, maxDelayMs: 20 },
      ),
      Error,
    );
    const elapsed = Date.now() - started;
    expect(error.message).toMatch(/^JetStream did not answer within 0.3 s: the events stream/);
    expect(error.cause).toBeInstanceOf(TimeoutError);
    expect(calls).toBeGreaterThan(2);
    expect(elapsed).toBeGreaterThanOrEqual(300);
    expect(elapsed).toBeLessThan(5_000);
  });
});
