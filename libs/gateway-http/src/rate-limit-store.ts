import type { FastifyRateLimitStore, FastifyRateLimitStoreCtor } from '@fastify/rate-limit';
import type { WindowCounter } from './window-counter';

/** What @fastify/rate-limit hands `child()`: its merged options, with the route they apply to. */
interface RouteLimitOptions {
  routeInfo?: { method?: string | string[]; url?: string };
}

/**
 * A store for @fastify/rate-limit over a WindowCounter, so route limits count in fixed windows
 * shared by every gateway replica. Each limited route counts in a scope of its own, named after it
 * (the plugin's in-memory store gives every route its own map; a shared store must keep them apart).
 */
export function windowCounterStore(counter: WindowCounter): FastifyRateLimitStoreCtor {
  class WindowCounterStore implements FastifyRateLimitStore {
    // The plugin constructs the root store with its options; routes get theirs through child().
    constructor(
      _options: unknown,
      private readonly scope = 'global',
    ) {}

    incr(
      key: string,
      callback: (error: Error | null, result?: { current: number; ttl: number }) => void,
      timeWindow: number,
      max: number,
    ): void {
      // Over `max` is over: no need for the shared count beyond max + 1.
      counter.increment(this.scope, key, timeWindow, max + 1).then(
        ({ count, resetInMs }) => callback(null, { current: count, ttl: resetInMs }),
        (error: unknown) => callback(error instanceof Error ? error : new Error(String(error))),
      );
    }

    child(options: object): FastifyRateLimitStore {
      // Typed by the plugin as the route; at run time it is the merged options, the route in `routeInfo`.
      return new WindowCounterStore(options, routeScope((options as RouteLimitOptions).routeInfo));
    }
  }
  return WindowCounterStore;
}

/** `POST /api/device/enroll` → `post-api-device-enroll` (letters, digits and -, as a counter scope). */
export function routeScope(route: RouteLimitOptions['routeInfo']): string {
  const method = [route?.method ?? 'any'].flat().join('-');
  const name = `${method}-${route?.url ?? ''}`
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '');
  return name.slice(0, 64) || 'route';
}
