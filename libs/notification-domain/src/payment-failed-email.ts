import { formatUtc, headerSafe, PRODUCT_NAME } from './email-format';
import { escapeHtml } from '@sts/vocabulary/html';
import { trimSlashes } from '@sts/vocabulary/urls';
import { formatMoney } from '@sts/vocabulary/money';
import type { OutgoingEmail } from './notification-model';

export interface PaymentFailedEmailInput {
  to: string;
  amountDue: number;
  currency: string;
  /** Stripe's page where the invoice can be paid; null when Stripe gave none. */
  invoiceUrl: string | null;
  nextAttemptAt: Date | null;
  /** Base address of the dashboard (`PUBLIC_APP_URL`): its billing page opens the customer portal. */
  publicAppUrl: string;
}

/**
 * To each ORG_ADMIN when Stripe could not collect a payment: what failed, when Stripe tries again, and
 * where to fix it (the invoice's page, the billing page with the customer portal). The license is
 * unchanged until Stripe gives up and cancels the subscription.
 */
export function renderPaymentFailedEmail(input: PaymentFailedEmailInput): OutgoingEmail {
  const amount = formatMoney(input.amountDue, input.currency);
  const billingUrl = `${trimSlashes(input.publicAppUrl)}/billing`;
  const retry = input.nextAttemptAt
    ? `Stripe will try again at ${formatUtc(input.nextAttemptAt)}.`
    : 'Stripe will not try again: pay the invoice, or the subscription ends.';
  const subject = headerSafe(`${PRODUCT_NAME}: a payment of ${amount} failed`);
  const text = [
    'Hello,',
    '',
    `A payment of ${amount} for your organization's ${PRODUCT_NAME} subscription failed. ${retry}`,
    '',
    ...(input.invoiceUrl ? ['Pay the invoice:', input.invoiceUrl, ''] : []),
    'Update the payment method in the billing portal:',
    billingUrl,
    '',
    'You receive this e-mail as an administrator of the organization.',
    '',
  ].join('\n');
  const e = escapeHtml;
  const html = `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>${e(subject)}</title></head>
<body style="font-family: sans-serif; line-height: 1.5; color: #1f2328;">
<p>Hello,</p>
<p>A payment of <strong>${e(amount)}</strong> for your organization's ${e(PRODUCT_NAME)} subscription failed. ${e(retry)}</p>
${input.invoiceUrl ? `<p><a href="${e(input.invoiceUrl)}">Pay the invoice</a></p>\n` : ''}<p><a href="${e(billingUrl)}">Update the payment method in the billing portal</a></p>
<p style="color: #57606a;">You receive this e-mail as an administrator of the organization.</p>
</body>
</html>
`;
  return { to: input.to, subject, text, html };
}
