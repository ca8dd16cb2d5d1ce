import { randomUUID } from 'node:crypto';
import {
  Server,
  ServerCredentials,
  type ServiceDefinition,
  type UntypedServiceImplementation,
  type sendUnaryData,
  type ServerUnaryCall,
} from '@grpc/grpc-js';
import { HealthImplementation } from 'grpc-health-check';
import { isAppError } from '@sts/errors/app-error';
import type { Logger } from '@sts/logger/create-logger';
import { appErrorToGrpc, internalErrorToGrpc } from './error-metadata';
import type { AsyncHandlers } from './service-types';

export interface ServiceRegistration {
  /** Fully qualified name for the health service, e.g. `identity.v1.IdentityService`. */
  name: string;
  definition: ServiceDefinition;
  implementation: UntypedServiceImplementation;
}

/**
 * Turns async handlers into grpc-js callbacks: AppErrors keep their code in metadata, anything
 * else is logged and reported as INTERNAL without leaking details.
 */
export function registerService<Definition extends ServiceDefinition>(
  name: string,
  definition: Definition,
  handlers: AsyncHandlers<Definition>,
  logger: Logger,
): ServiceRegistration {
  const implementation: UntypedServiceImplementation = {};
  for (const method of Object.keys(definition) as (keyof Definition & string)[]) {
    const handler = handlers[method] as (request: unknown, context: unknown) => Promise<unknown>;
    implementation[method] = (call: ServerUnaryCall<unknown, unknown>, callback: sendUnaryData<unknown>) => {
      const requestId = String(call.metadata.get('x-request-id')[0] ?? randomUUID());
      handler(call.request, { metadata: call.metadata, requestId }).then(
        (response) => callback(null, response),
        (error: unknown) => {
          if (isAppError(error)) {
            callback(appErrorToGrpc(error));
            return;
          }
          logger.error({ err: error, method: `${name}/${method}`, requestId }, 'unhandled error in gRPC handler');
          callback(internalErrorToGrpc());
        },
      );
    };
  }
  return { name, definition, implementation };
}

export interface RunningGrpcServer {
  port: number;
  health: HealthImplementation;
  shutdown(): Promise<void>;
}

/** Binds the services plus the standard gRPC health service (grpc.health.v1), all reported SERVING. */
export async function startGrpcServer(options: {
  host: string;
  port: number;
  services: ServiceRegistration[];
  logger: Logger;
}): Promise<RunningGrpcServer> {
  const server = new Server({ 'grpc.keepalive_permit_without_calls': 1 });
  const health = new HealthImplementation({ '': 'SERVING' });
  health.addToServer(server);
  for (const service of options.services) {
    server.addService(service.definition, service.implementation);
    health.setStatus(service.name, 'SERVING');
  }
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(`${options.host}:${options.port}`, ServerCredentials.createInsecure(), (error, boundPort) =>
      error ? reject(error) : resolve(boundPort),
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
