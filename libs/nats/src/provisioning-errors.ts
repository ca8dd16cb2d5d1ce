import { PermissionViolationError } from '@nats-io/nats-core';

/** Whether NATS refused a request because the connection's user may not publish to its subject. */
export function isPermissionDenied(error: unknown): boolean {
  for (let cause: unknown = error; cause instanceof Error; cause = cause.cause) {
    if (cause instanceof PermissionViolationError) return true;
  }
  return false;
}

/**
 * A stream, consumer or bucket is missing (or out of date) and this process's NATS user may not make it:
 * with a user per service, `nats-setup` makes them with the admin user, once per release.
 */
export class NatsProvisioningRequiredError extends Error {
  constructor(what: string, options?: { cause?: unknown }) {
    super(
      `${what}, and this NATS user may not change that: run nats-setup (dist/apps/nats-setup/main.js) with the NATS admin user first`,
      options,
    );
    this.name = 'NatsProvisioningRequiredError';
  }
}
