import { createServer, type Server } from 'node:https';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { generate } from 'selfsigned';

/** A certificate authority of its own, to issue receivers' certificates the code under test trusts. */
export interface TestCertificateAuthority {
  /** The CA certificate (PEM): what the client is told to trust. */
  certPem: string;
  /**
   * A certificate and key for `localhost`, 127.0.0.1 and ::1, signed by this CA; with `clientAuth`
   * also good as a client certificate (mutual TLS between services).
   */
  issueLocalhost(options?: { clientAuth?: boolean }): Promise<{ cert: string; key: string }>;
}

export async function testCertificateAuthority(): Promise<TestCertificateAuthority> {
  const notAfterDate = new Date(Date.now() + 7 * 86_400_000);
  const ca = await generate([{ name: 'commonName', value: 'sts test CA' }], {
    keyType: 'ec',
    algorithm: 'sha256',
    curve: 'P-256',
    notAfterDate,
    extensions: [
      { name: 'basicConstraints', cA: true, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
    ],
  });
  return {
    certPem: ca.cert,
    issueLocalhost: async (options = {}) => {
      const leaf = await generate([{ name: 'commonName', value: 'localhost' }], {
        keyType: 'ec',
        algorithm: 'sha256',
        curve: 'P-256',
        notAfterDate,
        ca: { key: ca.private, cert: ca.cert },
        extensions: [
          { name: 'basicConstraints', cA: false },
          { name: 'keyUsage', digitalSignature: true, keyEncipherment: true },
          { name: 'extKeyUsage', serverAuth: true, clientAuth: options.clientAuth === true },
          {
            name: 'subjectAltName',
            altNames: [
              { type: 2, value: 'localhost' },
              { type: 7, ip: '127.0.0.1' },
              { type: 7, ip: '::1' },
            ],
          },
        ],
      });
      return { cert: leaf.cert, key: leaf.private };
    },
  };
}

export interface ReceivedRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  at: number;
}

/** What the receiver does with a request: answer (status, headers) or drop the connection, or never answer. */
export type ReceiverBehaviour =
  { status: number; headers?: Record<string, string> } | 'drop-connection' | 'never-answer';

export interface HttpsReceiver {
  /** `https://localhost:<port>` */
  url: string;
  port: number;
  requests: ReceivedRequest[];
  /** Decides the answer to each request (by default 200). */
  behave(next: (request: ReceivedRequest, index: number) => ReceiverBehaviour): void;
  close(): Promise<void>;
}

/** A real HTTPS server on this machine (::, or 127.0.0.1 without IPv6) with a certificate of `ca`, recording every request. */
export async function startHttpsReceiver(ca: TestCertificateAuthority): Promise<HttpsReceiver> {
  const { cert, key } = await ca.issueLocalhost();
  const requests: ReceivedRequest[] = [];
  let decide: (request: ReceivedRequest, index: number) => ReceiverBehaviour = () => ({ status: 200 });
  const sockets = new Set<Socket>();
  const server: Server = createServer({ cert, key }, (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const received: ReceivedRequest = {
        method: req.method ?? '',
        path: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
        at: Date.now(),
      };
      requests.push(received);
      const behaviour = decide(received, requests.length - 1);
      if (behaviour === 'drop-connection') {
        req.socket.destroy();
        return;
      }
      if (behaviour === 'never-answer') return;
      res.writeHead(behaviour.status, behaviour.headers ?? {}).end('ok');
    });
  });
  server.on('secureConnection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  // Both families where the machine has IPv6 (`localhost` may resolve to ::1 first), else IPv4.
  await new Promise<void>((resolve, reject) => {
    server.once('error', () => {
      server.removeAllListeners('error');
      server.once('error', reject);
      server.listen(0, '127.0.0.1', resolve);
    });
    server.listen(0, '::', () => {
      server.removeAllListeners('error');
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `https://localhost:${port}`,
    port,
    requests,
    behave: (next) => {
      decide = next;
    },
    close: () =>
      new Promise<void>((resolve) => {
        sockets.forEach((socket) => socket.destroy());
        server.close(() => resolve());
      }),
  };
}
