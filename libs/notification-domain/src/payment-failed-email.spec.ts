import { renderPaymentFailedEmail, type PaymentFailedEmailInput } from './payment-failed-email';

const input: PaymentFailedEmailInput = {
  to: 'admin@example.com',
  amountDue: 2900,
  currency: 'usd',
  invoiceUrl: 'https://invoice.stripe.com/i/acct_1/in_1',
  nextAttemptAt: new Date('2026-03-05T09:00:00.000Z'),
  publicAppUrl: 'https://app.example.com/',
};

const HTML_HEAD = [
  '<!doctype html>',
  '<html lang="en">',
  '<head><meta charset="utf-8"><title>Security Telemetry: a payment of $29.00 failed</title></head>',
  '<body style="font-family: sans-serif; line-height: 1.5; color: #1f2328;">',
  '<p>Hello,</p>',
];
const HTML_TAIL = [
  '<p><a href="https://app.example.com/billing">Update the payment method in the billing portal</a></p>',
  '<p style="color: #57606a;">You receive this e-mail as an administrator of the organization.</p>',
  '</body>',
  '</html>',
  '',
];

describe('payment failed e-mail', () => {
  it('sends the admin the whole e-mail: the amount, the next attempt, the invoice and the billing page', () => {
    expect(renderPaymentFailedEmail(input)).toEqual({
      to: 'admin@example.com',
      subject: 'Security Telemetry: a payment of $29.00 failed',
      text: [
        'Hello,',
        '',
        "A payment of $29.00 for your organization's Security Telemetry subscription failed. Stripe will try again at 2026-03-05 09:00 UTC.",
        '',
        'Pay the invoice:',
        'https://invoice.stripe.com/i/acct_1/in_1',
        '',
        'Update the payment method in the billing portal:',
        'https://app.example.com/billing',
        '',
        'You receive this e-mail as an administrator of the organization.',
        '',
      ].join('\n'),
      html: [
        ...HTML_HEAD,
        "<p>A payment of <strong>$29.00</strong> for your organization's Security Telemetry subscription failed. Stripe will try again at 2026-03-05 09:00 UTC.</p>",
        '<p><a href="https://invoice.stripe.com/i/acct_1/in_1">Pay the invoice</a></p>',
        ...HTML_TAIL,
      ].join('\n'),
    });
  });

  it('without an invoice page and with no further attempt: says Stripe gives up and links only the billing page', () => {
    expect(renderPaymentFailedEmail({ ...input, invoiceUrl: null, nextAttemptAt: null })).toEqual({
      to: 'admin@example.com',
      subject: 'Security Telemetry: a payment of $29.00 failed',
      text: [
        'Hello,',
        '',
        "A payment of $29.00 for your organization's Security Telemetry subscription failed. Stripe will not try again: pay the invoice, or the subscription ends.",
        '',
        'Update the payment method in the billing portal:',
        'https://app.example.com/billing',
        '',
        'You receive this e-mail as an administrator of the organization.',
        '',
      ].join('\n'),
      html: [
        ...HTML_HEAD,
        "<p>A payment of <strong>$29.00</strong> for your organization's Security Telemetry subscription failed. Stripe will not try again: pay the invoice, or the subscription ends.</p>",
        ...HTML_TAIL,
      ].join('\n'),
    });
  });

  it('escapes the invoice address in the HTML part', () => {
    const invoiceUrl = 'https://invoice.stripe.com/i/x"><script>alert(1)</script>&a=1';
    const email = renderPaymentFailedEmail({ ...input, invoiceUrl });

    expect(email.html).not.toContain('<script>');
    expect(email.html).toContain(
      '<p><a href="https://invoice.stripe.com/i/x&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;&amp;a=1">Pay the invoice</a></p>',
    );
    // The plain-text part is not HTML: the address appears as it is.
    expect(email.text).toContain(`Pay the invoice:\n${invoiceUrl}\n`);
  });

  it('keeps the subject on one line even when the currency carries line breaks', () => {
    const email = renderPaymentFailedEmail({ ...input, currency: 'usd\r\nBcc: victim@example.com' });

    expect(email.subject).toBe('Security Telemetry: a payment of 2900 USD BCC: VICTIM@EXAMPLE.COM failed');
  });
});
