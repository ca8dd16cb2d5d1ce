import type { Metadata } from '@grpc/grpc-js';
import type { Context } from '@sts/observability/trace-context';

/**
 * Types derived from a ts-proto service definition (`IdentityServiceService` etc.), so handlers and
 * clients are typed from the generated contract without hand-written interfaces.
 */
export type RequestOf<Method> = Method extends { requestDeserialize: (buffer: Buffer) => infer Request }
  ? Request
  : never;
export type ResponseOf<Method> = Method extends { responseDeserialize: (buffer: Buffer) => infer Response }
  ? Response
  : never;

export interface CallContext {
  readonly metadata: Metadata;
  /** Correlates logs across the gateway and services (`x-request-id`). */
  readonly requestId: string;
}

/** What a service implements: one async function per RPC. */
export type AsyncHandlers<Definition> = {
  [Name in keyof Definition]: (
    request: RequestOf<Definition[Name]>,
    context: CallContext,
  ) => Promise<ResponseOf<Definition[Name]>>;
};

export interface CallOptions {
  deadlineMs?: number;
  requestId?: string;
  /** The caller's trace context, where it is passed by hand (the gateway); the active context otherwise. */
  traceContext?: Context | undefined;
}

/** What a caller gets: one promise-returning function per RPC, with deadlines and mapped errors. */
export type PromiseClient<Definition> = {
  [Name in keyof Definition]: (
    request: RequestOf<Definition[Name]>,
    options?: CallOptions,
  ) => Promise<ResponseOf<Definition[Name]>>;
};
