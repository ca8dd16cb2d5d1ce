import { createTransport } from 'nodemailer';
import type { Logger } from '@sts/logger/create-logger';
import type { OutgoingEmail } from '@sts/notification-domain/notification-model';
import type { Mailer } from '@sts/notification-domain/notification-ports';

export interface SmtpMailerOptions {
  /** `smtp://[user:pass@]host:port` or `smtps://…` (SMTP_URL). */
  url: string;
  /** Sender address, e.g. `Security Telemetry <no-reply@example.com>` (MAIL_FROM). */
  from: string;
  logger: Logger;
}

export interface SmtpMailer extends Mailer {
  /** Closes the pooled connections. */
  close(): void;
}

/**
 * Mailer over SMTP (nodemailer) with a small connection pool. Every stage of a connection is bounded
 * in time, so a silent or slow server fails the send (and the event is retried) instead of holding
 * the consumer and its database transaction.
 */
export function createSmtpMailer(options: SmtpMailerOptions): SmtpMailer {
  const transport = createTransport({
    url: options.url,
    pool: true,
    maxConnections: 3,
    maxMessages: 100,
    connectionTimeout: 10_000,
    greetingTimeout: 10_000,
    socketTimeout: 20_000,
  });
  return {
    async send(email: OutgoingEmail): Promise<void> {
      const info = await transport.sendMail({
        from: options.from,
        to: email.to,
        subject: email.subject,
        text: email.text,
        html: email.html,
      });
      // Not the recipient or the body: the e-mail log row holds what support needs.
      options.logger.debug({ messageId: info.messageId }, 'e-mail accepted by the SMTP server');
    },
    close: () => transport.close(),
  };
}
