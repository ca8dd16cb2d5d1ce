import { Client } from '@grpc/grpc-js';
import { grpcChannelCredentials, type GrpcTls } from './grpc-tls';

/**
 * Asks a server's standard health service (grpc.health.v1.Health/Check, the whole server) whether it
 * is SERVING, as Kubernetes' gRPC probes do. The messages are tiny, so they are written by hand: the
 * request is empty, and the answer's field 1 (`status`, a varint) is 1 for SERVING.
 */
export function probeGrpcHealth(
  address: string,
  timeoutMs: number,
  tls: GrpcTls | null = null,
): Promise<boolean> {
  const client = new Client(address, grpcChannelCredentials(tls));
  return new Promise<boolean>((resolve) => {
    client.makeUnaryRequest(
      '/grpc.health.v1.Health/Check',
      () => Buffer.alloc(0),
      (bytes: Buffer) => bytes,
      {},
      { deadline: Date.now() + timeoutMs },
      (error, response) =>
        resolve(!error && response !== undefined && response[0] === 0x08 && response[1] === 0x01),
    );
  }).finally(() => client.close());
}
