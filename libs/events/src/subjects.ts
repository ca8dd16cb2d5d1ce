import type { EventType } from './event-catalogue';

/**
 * Subject and stream naming, in one place. Domain events live in one stream per namespace:
 * `<NAMESPACE>_EVENTS` with subjects `<namespace>.events.<type>`.
 */
/** How long the events stream keeps an event (its max_age); what the outbox and dedupe ledgers keep follows it. */
export const EVENT_RETENTION_MS = 7 * 24 * 60 * 60 * 1000;

export function eventsStreamName(namespace: string): string {
  return `${namespace.toUpperCase()}_EVENTS`;
}

export function eventSubject(namespace: string, type: EventType): string {
  return `${namespace}.events.${type}`;
}

export function allEventsSubject(namespace: string): string {
  return `${namespace}.events.>`;
}

export function eventTypeFromSubject(namespace: string, subject: string): string {
  const prefix = `${namespace}.events.`;
  return subject.startsWith(prefix) ? subject.slice(prefix.length) : subject;
}
