import { Client, Metadata } from '@grpc/grpc-js';
import { grpcChannelCredentials, type GrpcTls } from './grpc-tls';

export type HealthAnswer = 'serving' | 'not-serving' | 'unknown';

/** HealthCheckRequest{service}: field 1, length-delimited (written by hand: the message is tiny). */
function healthRequest(service: string): Buffer {
  const name = Buffer.from(service, 'utf8');
  return name.length === 0 ? Buffer.alloc(0) : Buffer.concat([Buffer.from([0x0a, name.length]), name]);
}

/**
 * Asks a server's standard health service (grpc.health.v1.Health/Check) about `service` (`''`: the whole
 * server), as Kubernetes' gRPC probes do: `serving` when its answer's field 1 (`status`, a varint) is 1
 * (SERVING), `unknown` when the server has no such name or cannot be asked.
 */
export function grpcHealth(
  address: string,
  timeoutMs: number,
  tls: GrpcTls | null = null,
  service = '',
): Promise<HealthAnswer> {
  const client = new Client(address, grpcChannelCredentials(tls));
  return new Promise<HealthAnswer>((resolve) => {
    client.makeUnaryRequest(
      '/grpc.health.v1.Health/Check',
      () => healthRequest(service),
      (bytes: Buffer) => bytes,
      service,
      new Metadata(),
      { deadline: Date.now() + timeoutMs },
      (error, response) => {
        if (error || response === undefined) return resolve('unknown');
        resolve(response[0] === 0x08 && response[1] === 0x01 ? 'serving' : 'not-serving');
      },
    );
  }).finally(() => client.close());
}

/** Whether the server (or one of its names) is SERVING. */
export async function probeGrpcHealth(
  address: string,
  timeoutMs: number,
  tls: GrpcTls | null = null,
  service = '',
): Promise<boolean> {
  return (await grpcHealth(address, timeoutMs, tls, service)) === 'serving';
}
