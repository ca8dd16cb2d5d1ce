import { createLogger } from '@sts/logger/create-logger';
import { connectJetStream, type JetStreamConnection } from '@sts/nats/jetstream-connection';
import { ensureTelemetry } from '@sts/nats/nats-topology';
import { deleteNamespaceStreams, uniqueNatsNamespace } from '@sts/testing/nats-namespace';
import type { TelemetryBatchMessage } from '@sts/events/telemetry';
import { jetStreamTelemetrySink, telemetryBodyLimit } from './telemetry-sink';

/** The sink against the real NATS server: what it says when a batch cannot become one message. */
describe('jetStreamTelemetrySink on the real NATS server', () => {
  const logger = createLogger('telemetry-sink-int', 'silent');
  const namespace = uniqueNatsNamespace();
  let nats: JetStreamConnection;

  beforeAll(async () => {
    nats = await connectJetStream({
      url: process.env.NATS_URL ?? 'nats://127.0.0.1:4222',
      name: 'telemetry-sink-int',
      logger,
    });
    await ensureTelemetry(nats.jsm, namespace, logger);
  });

  afterAll(async () => {
    await deleteNamespaceStreams(nats.jsm, namespace);
    await nats.close();
  });

  const batch = (batchId: string, events: number, hostLength: number): TelemetryBatchMessage => ({
    org_id: '0b6a8a55-7c55-4b8e-9d0e-5f2f3c1a1a01',
    device_id: '0b6a8a55-7c55-4b8e-9d0e-5f2f3c1a1a02',
    batch_id: batchId,
    received_at: Date.now(),
    events: Array.from({ length: events }, (_, i) => ({
      observed_at: Date.now() - 60_000,
      host: `${String(i).padStart(hostLength - 8, 'h')}.example`,
      verdict: 'allowed' as const,
      classification_ms: 1,
    })),
  });

  it('takes a batch that fits, and refuses one over max_payload with 413 PAYLOAD_TOO_LARGE, not 503', async () => {
    const maxPayload = nats.nc.info!.max_payload;
    const sink = jetStreamTelemetrySink(nats.js, namespace, 3_000);
    expect(await sink(batch('fits', 100, 60))).toEqual({ duplicate: false });
    // 5,000 events of 250-character hosts: some 1.5 MB as a message, within a 2 MiB request body.
    const large = batch('large', 5_000, 250);
    expect(Buffer.byteLength(JSON.stringify(large))).toBeGreaterThan(maxPayload);
    await expect(sink(large)).rejects.toMatchObject({ code: 'PAYLOAD_TOO_LARGE', httpStatus: 413 });
    // The connection is still good for the next batch.
    expect(await sink(batch('after', 10, 60))).toEqual({ duplicate: false });
    expect((await nats.jsm.streams.info(`${namespace.toUpperCase()}_TELEMETRY`)).state.messages).toBe(2);
  });

  it("keeps the gateway's telemetry body limit within what this server takes", () => {
    const maxPayload = nats.nc.info!.max_payload;
    const limit = telemetryBodyLimit(2 * 1024 * 1024, maxPayload);
    expect(limit).toBeLessThan(maxPayload);
    expect(limit).toBeLessThanOrEqual(2 * 1024 * 1024);
  });
});
