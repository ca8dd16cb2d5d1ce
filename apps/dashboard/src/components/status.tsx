import type { ReactNode } from 'react';
import { problemMessage } from '../api/problem';

/** A refusal or failure, read out at once: the API's problem detail (or title). */
export function ProblemMessage({
  error,
  onRetry,
  prefix = 'Error',
}: {
  error: unknown;
  onRetry?: () => void;
  prefix?: string;
}) {
  if (!error) return null;
  return (
    <div role="alert" className="message message-error">
      <p>
        <strong>{prefix}: </strong>
        {problemMessage(error)}
      </p>
      {onRetry && (
        <button type="button" className="button-secondary" onClick={onRetry}>
          Try again
        </button>
      )}
    </div>
  );
}

/** A success or progress message, read out politely. */
export function StatusMessage({ children }: { children: ReactNode }) {
  if (!children) return null;
  return (
    <div role="status" className="message message-success">
      {children}
    </div>
  );
}

export function Loading({ what }: { what: string }) {
  return (
    <p role="status" className="loading">
      Loading {what}…
    </p>
  );
}

export function Empty({ children }: { children: ReactNode }) {
  return <p className="empty">{children}</p>;
}
