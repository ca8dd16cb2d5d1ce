import { randomUUID } from 'node:crypto';
import {
  Server,
  type MethodDefinition,
  type ServiceDefinition,
  type UntypedServiceImplementation,
  type sendUnaryData,
  type ServerUnaryCall,
} from '@grpc/grpc-js';
import { HealthImplementation } from 'grpc-health-check';
import { AppError, isAppError } from '@sts/errors/app-error';
import type { Logger } from '@sts/logger/create-logger';
import type { ServiceName } from '@sts/vocabulary/services';
import { appErrorToGrpc, internalErrorToGrpc } from './error-metadata';
import { observeServerMethod } from './grpc-observability';
import { grpcServerCredentials, type GrpcTls } from './grpc-tls';
import type { AsyncHandlers } from './service-types';
import { SERVICE_TOKEN_METADATA_KEY, type CallerCheck, type ServiceTokenVerifier } from './service-token';

export interface ServiceRegistration {
  /** Fully qualified name for the health service, e.g. `identity.v1.IdentityService`. */
  name: string;
  /** The generated definition with bytes in and out (registerService encodes and decodes). */
  definition: ServiceDefinition;
  implementation: UntypedServiceImplementation;
  /** Services that may call these methods besides the server's callers of every method. */
  extraCallers: Readonly<Record<string, readonly ServiceName[]>>;
}

/**
 * Turns async handlers into grpc-js callbacks: AppErrors keep their code in metadata, anything
 * else is logged and reported as INTERNAL without leaking details.
 *
 * grpc-js sees only bytes: we decode the request and encode the response ourselves. Why: grpc-js's
 * per-call objects stay reachable to V8's young-generation collector for a while after the call
 * ends (not to a full collection; grpc-client.ts says more), so a response object handed to grpc-js
 * was copied and promoted with them. As bytes, it is one buffer whose contents are never copied.
 */
export function registerService<Definition extends ServiceDefinition>(
  name: string,
  definition: Definition,
  handlers: AsyncHandlers<Definition>,
  logger: Logger,
  options: {
    /** Least privilege between services: another service that may call only these methods. */
    extraCallers?: Partial<Record<keyof Definition & string, readonly ServiceName[]>>;
  } = {},
): ServiceRegistration {
  const implementation: UntypedServiceImplementation = {};
  const wireDefinition: Record<string, MethodDefinition<Buffer, Buffer>> = {};
  for (const method of Object.keys(definition) as (keyof Definition & string)[]) {
    const rpc = definition[method];
    if (!rpc || rpc.requestStream || rpc.responseStream)
      throw new Error(`gRPC method ${method} is not unary`);
    wireDefinition[method] = { ...rpc, requestDeserialize: keepBytes, responseSerialize: keepBytes };
    const handler = handlers[method] as (request: unknown, context: unknown) => Promise<unknown>;
    const fail = (callback: sendUnaryData<Buffer>, error: unknown, requestId: string) => {
      if (isAppError(error)) return callback(appErrorToGrpc(error));
      logger.error({ err: error, method: `${name}/${method}`, requestId }, 'unhandled error in gRPC handler');
      callback(internalErrorToGrpc());
    };
    implementation[method] = (call: ServerUnaryCall<Buffer, Buffer>, callback: sendUnaryData<Buffer>) => {
      const requestId = String(call.metadata.get('x-request-id')[0] ?? randomUUID());
      let request: unknown;
      try {
        request = rpc.requestDeserialize(call.request);
      } catch {
        return callback(
          appErrorToGrpc(new AppError('MALFORMED_REQUEST', 'The request message could not be decoded')),
        );
      }
      handler(request, { metadata: call.metadata, requestId }).then(
        (response) => {
          let bytes: Buffer;
          try {
            bytes = rpc.responseSerialize(response);
          } catch (error) {
            return fail(callback, error, requestId);
          }
          callback(null, bytes);
        },
        (error: unknown) => fail(callback, error, requestId),
      );
    };
  }
  return {
    name,
    definition: wireDefinition,
    implementation,
    extraCallers: (options.extraCallers ?? {}) as Record<string, readonly ServiceName[]>,
  };
}

function keepBytes(bytes: Buffer): Buffer {
  return bytes;
}

/** Wraps every method of a service so that it runs only for a caller whose service token checks out. */
function requireServiceToken(
  service: ServiceRegistration,
  callers: ServiceTokenVerifier,
  everyMethodCallers: readonly ServiceName[],
  logger: Logger,
): UntypedServiceImplementation {
  const guarded: UntypedServiceImplementation = {};
  for (const [method, handle] of Object.entries(service.implementation)) {
    const run = handle as (call: ServerUnaryCall<Buffer, Buffer>, callback: sendUnaryData<Buffer>) => void;
    const allowed = new Set([...everyMethodCallers, ...(service.extraCallers[method] ?? [])]);
    // Refused calls are counted and traced too.
    guarded[method] = observeServerMethod(
      service.name,
      method,
      (call: ServerUnaryCall<Buffer, Buffer>, callback: sendUnaryData<Buffer>) => {
        const proceed = (verified: CallerCheck) => {
          const check: CallerCheck =
            verified.ok && !allowed.has(verified.caller)
              ? { ok: false, reason: `service ${verified.caller} may not call ${method}` }
              : verified;
          if (check.ok) return run(call, callback);
          logger.warn(
            { method: `${service.name}/${method}`, peer: call.getPeer(), reason: check.reason },
            'gRPC call refused',
          );
          callback(
            appErrorToGrpc(
              new AppError('SERVICE_CALLER_REFUSED', 'The call did not carry a valid service token'),
            ),
          );
        };
        const check = callers.check(call.metadata.get(SERVICE_TOKEN_METADATA_KEY)[0]);
        if ('then' in check) void check.then(proceed);
        else proceed(check);
      },
    );
  }
  return guarded;
}

export interface RunningGrpcServer {
  port: number;
  health: HealthImplementation;
  shutdown(): Promise<void>;
}

/**
 * Binds the services plus the standard gRPC health service (grpc.health.v1), all reported SERVING.
 * Every call to the services must present a service token that `callers` accepts; the health
 * service answers anyone (probes carry no token, and it tells nothing but SERVING or not).
 */
export async function startGrpcServer(options: {
  host: string;
  port: number;
  services: ServiceRegistration[];
  /** Verifies service tokens; it must accept every caller of any method. */
  callers: ServiceTokenVerifier;
  /** The services that may call every method (others only the methods that name them). */
  everyMethodCallers: readonly ServiceName[];
  /** Mutual TLS (every client must present a certificate of the CA); plaintext without. */
  tls?: GrpcTls | null;
  logger: Logger;
}): Promise<RunningGrpcServer> {
  const server = new Server({
    'grpc.keepalive_permit_without_calls': 1,
    // A client keeps one HTTP/2 connection; behind a Kubernetes Service it would stay on one replica
    // for good. Ending connections after a few minutes (calls in flight get a minute to finish) makes
    // clients reconnect and spread over the replicas there are now, those an autoscaler added too.
    'grpc.max_connection_age_ms': 5 * 60_000,
    'grpc.max_connection_age_grace_ms': 60_000,
  });
  const health = new HealthImplementation({ '': 'SERVING' });
  health.addToServer(server);
  for (const service of options.services) {
    server.addService(
      service.definition,
      requireServiceToken(service, options.callers, options.everyMethodCallers, options.logger),
    );
    health.setStatus(service.name, 'SERVING');
  }
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(
      `${options.host}:${options.port}`,
      grpcServerCredentials(options.tls ?? null),
      (error, boundPort) => (error ? reject(error) : resolve(boundPort)),
    );
  });
  options.logger.info({ port, services: options.services.map((s) => s.name) }, 'gRPC server listening');
  return {
    port,
    health,
    shutdown: () =>
      new Promise<void>((resolve) => {
        for (const service of options.services) health.setStatus(service.name, 'NOT_SERVING');
        health.setStatus('', 'NOT_SERVING');
        const timer = setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, 5_000);
        server.tryShutdown(() => {
          clearTimeout(timer);
          resolve();
        });
      }),
  };
}
