import type { AddressInfo } from 'node:net';
import { createLogger } from '@sts/logger/create-logger';
import { loggedLifecycle, runProcess } from '@sts/runtime/lifecycle';
import { startSmtpSink } from '@sts/stand-ins/smtp-sink';
import { loadDevMailboxConfig } from './dev-mailbox-config';
import { createMailboxHttpServer } from './mailbox-http';

/** Development mailbox: an SMTP sink on DEV_MAILBOX_SMTP_PORT with a web view on DEV_MAILBOX_HTTP_PORT. */
runProcess('dev-mailbox', async () => {
  const config = loadDevMailboxConfig(); // refuses NODE_ENV=production
  const log = createLogger('dev-mailbox', config.LOG_LEVEL);
  const lifecycle = loggedLifecycle(log);

  const sink = await startSmtpSink({
    host: config.DEV_MAILBOX_HOST,
    port: config.DEV_MAILBOX_SMTP_PORT,
    maxMessages: config.DEV_MAILBOX_MAX_MESSAGES,
    // Subject and recipients only: bodies may carry invitation links.
    onMail: (mail) => log.info({ id: mail.id, subject: mail.subject, to: mail.envelope.to }, 'mail received'),
  });
  lifecycle.add('smtp', () => sink.close());

  const http = createMailboxHttpServer(sink);
  await new Promise<void>((resolve, reject) => {
    http.once('error', reject);
    http.listen(config.DEV_MAILBOX_HTTP_PORT, config.DEV_MAILBOX_HOST, () => resolve());
  });
  lifecycle.add(
    'http',
    () =>
      new Promise<void>((resolve) => {
        http.close(() => resolve());
        http.closeAllConnections(); // browsers keep connections open
      }),
  );

  const { port: httpPort } = http.address() as AddressInfo;
  log.info(
    {
      smtp_url: sink.url,
      web: `http://${config.DEV_MAILBOX_HOST}:${httpPort}/`,
      keeps: config.DEV_MAILBOX_MAX_MESSAGES,
    },
    `dev-mailbox accepting mail at ${sink.url}; read it at http://${config.DEV_MAILBOX_HOST}:${httpPort}/`,
  );
  return { logger: log, stop: () => lifecycle.close() };
});
