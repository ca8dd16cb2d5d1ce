import { createServer } from 'node:net';

/**
 * The one way a test picks a TCP port for something that must be told its port before it listens (a
 * child process, a nats-server's configuration), or a port that nothing listens on.
 *
 * A random port between 20000 and 32000, tried before it is handed out: below Linux's ephemeral range
 * (32768 and up), which the kernel gives to outgoing connections. Asking the kernel for one (`listen(0)`,
 * then closing) returns a port from that very range, which any outgoing connection of the machine can
 * take before the child binds it (seen: a service's metrics port taken between asking and listening).
 * What can listen itself, in this process, should listen on port 0 and read its port instead.
 */
export async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const port = 20_000 + Math.floor(Math.random() * 12_000);
    if (await canListen(port)) return port;
  }
  throw new Error('no free port between 20000 and 32000');
}

function canListen(port: number): Promise<boolean> {
  const server = createServer();
  return new Promise((resolveListen) => {
    server.once('error', () => resolveListen(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolveListen(true)));
  });
}
