import { createServer, connect, type Server, type Socket } from 'node:net';

/** A backend: a port on 127.0.0.1, or `host:port`. */
export type TcpBackend = number | string;

export interface TcpBalancer<Backend extends TcpBackend = number> {
  /** 127.0.0.1 port the balancer listens on. */
  port: number;
  /** Open connections through the balancer to each backend. */
  connections(): Map<Backend, number>;
  /** Backends a health check took out of rotation at least once (they may be back since). */
  everUnhealthy(): Set<Backend>;
  close(): Promise<void>;
}

function addressOf(backend: TcpBackend): { host: string; port: number } {
  if (typeof backend === 'number') return { host: '127.0.0.1', port: backend };
  const at = backend.lastIndexOf(':');
  return { host: backend.slice(0, at), port: Number(backend.slice(at + 1)) };
}

/**
 * A layer-4 load balancer in front of replicas, as a cloud balancer or kube-proxy is: each connection
 * goes to the next backend in rotation; a backend that refuses the connection (nothing was sent to
 * it yet) is skipped for the next one, the one retry such a balancer makes. A reset from a backend
 * reaches the client as a reset. With `healthCheck`, backends are polled and those failing it
 * `failureThreshold` times in a row leave the rotation until they pass again (a readiness probe).
 */
export async function startTcpBalancer<Backend extends TcpBackend = number>(
  backendPorts: Backend[],
  options: {
    healthCheck?: (backend: Backend) => Promise<boolean>;
    healthIntervalMs?: number;
    /** Consecutive failed checks that take a backend out of rotation (a probe's failureThreshold); 1 by default. */
    failureThreshold?: number;
  } = {},
): Promise<TcpBalancer<Backend>> {
  const unhealthy = new Set<Backend>();
  const everUnhealthy = new Set<Backend>();
  const open = new Map<Backend, Set<Socket>>(backendPorts.map((port) => [port, new Set<Socket>()]));
  const clients = new Set<Socket>();
  /** Connections to backends not yet established (closed too when the balancer closes). */
  const connecting = new Set<Socket>();
  let next = 0;
  let closed = false;

  const candidates = () => backendPorts.filter((port) => !unhealthy.has(port));

  const server: Server = createServer({ pauseOnConnect: true }, (client) => {
    clients.add(client);
    client.on('close', () => clients.delete(client));
    client.on('error', () => client.destroy());
    const tried = new Set<Backend>();
    const attempt = () => {
      const ports = candidates().filter((port) => !tried.has(port));
      if (ports.length === 0 || closed) {
        client.resetAndDestroy();
        return;
      }
      const backendPort = ports[next++ % ports.length]!;
      tried.add(backendPort);
      const backend = addressOf(backendPort);
      const upstream = connect(backend.port, backend.host);
      connecting.add(upstream);
      let connected = false;
      upstream.once('close', () => connecting.delete(upstream));
      upstream.once('connect', () => {
        connected = true;
        connecting.delete(upstream);
        open.get(backendPort)!.add(upstream);
        upstream.on('close', () => open.get(backendPort)!.delete(upstream));
        client.pipe(upstream);
        upstream.pipe(client);
        client.resume();
        // A backend's reset reaches the client as a reset, not as an orderly close, unless the pipe has
        // already ended the client (the backend's FIN came first): a reset racing that shutdown leaves
        // the handle referenced, and Node (20 and 24 alike) then spins at full CPU in its exit cleanup,
        // never exiting. The other way a plain close, for the same reason.
        upstream.on('error', () => (client.writableEnded ? client.destroy() : client.resetAndDestroy()));
        client.on('error', () => upstream.destroy());
        client.on('close', () => upstream.destroy());
        upstream.on('close', () => client.destroy());
      });
      upstream.once('error', () => {
        if (!connected) attempt();
      });
    };
    attempt();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (!address || typeof address === 'string') throw new Error('balancer has no port');

  // Each backend is probed on its own schedule, as a kubelet probes each pod: a slow answer from one
  // does not delay the checks of another.
  const polling = new Set<NodeJS.Timeout>();
  if (options.healthCheck) {
    const check = options.healthCheck;
    const threshold = options.failureThreshold ?? 1;
    const probe = async (port: Backend, failuresInARow: number): Promise<void> => {
      const healthy = await check(port).catch(() => false);
      const failures = healthy ? 0 : failuresInARow + 1;
      if (failures === 0) unhealthy.delete(port);
      else if (failures >= threshold) {
        unhealthy.add(port);
        everUnhealthy.add(port);
      }
      if (closed) return;
      const timer = setTimeout(() => {
        polling.delete(timer);
        void probe(port, failures);
      }, options.healthIntervalMs ?? 200);
      polling.add(timer);
    };
    await Promise.all(backendPorts.map((port) => probe(port, 0)));
  }

  return {
    port: address.port,
    connections: () => new Map([...open].map(([port, sockets]) => [port, sockets.size])),
    everUnhealthy: () => new Set(everUnhealthy),
    close: () =>
      new Promise<void>((resolve) => {
        closed = true;
        for (const timer of polling) clearTimeout(timer);
        for (const socket of clients) socket.destroy();
        for (const sockets of open.values()) for (const socket of sockets) socket.destroy();
        for (const socket of connecting) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
