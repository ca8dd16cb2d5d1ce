/**
 * How old a signed Stripe webhook may be: Stripe's own default. Billing verifies with it, and the gateway
 * refuses older (or far-future) timestamps before forwarding a body.
 */
export const STRIPE_SIGNATURE_TOLERANCE_SECONDS = 300;

/** The longest Stripe-Signature header taken: a timestamp and a few signatures (rotated secrets). */
const MAX_HEADER_LENGTH = 1024;
const V1_SIGNATURE = /^[0-9a-f]{64}$/;

/**
 * What is wrong with a Stripe-Signature header's shape (`t=<unix seconds>,v1=<64 hex>[,v1=…][,v0=…]`),
 * or null: a timestamp within the tolerance of `nowSeconds` and at least one v1 signature. Checks the
 * shape only; whether a signature verifies the body is for whoever holds the secret.
 */
export function stripeSignatureHeaderProblem(header: string, nowSeconds: number): string | null {
  if (header.length > MAX_HEADER_LENGTH) return 'The Stripe-Signature header is too long';
  let timestamp: number | null = null;
  let signatures = 0;
  for (const part of header.split(',')) {
    const separator = part.indexOf('=');
    const name = part.slice(0, separator).trim();
    const value = part.slice(separator + 1).trim();
    if (separator <= 0) return 'The Stripe-Signature header is not a list of name=value pairs';
    if (name === 't') {
      if (timestamp !== null || !/^\d{1,12}$/.test(value))
        return 'The Stripe-Signature header needs one t=<unix seconds>';
      timestamp = Number(value);
    } else if (name === 'v1') {
      if (!V1_SIGNATURE.test(value))
        return 'A v1 signature of the Stripe-Signature header is not 64 hex digits';
      signatures++;
    }
  }
  if (timestamp === null) return 'The Stripe-Signature header has no timestamp (t=)';
  if (signatures === 0) return 'The Stripe-Signature header has no v1 signature';
  if (Math.abs(nowSeconds - timestamp) > STRIPE_SIGNATURE_TOLERANCE_SECONDS)
    return `The Stripe-Signature timestamp is more than ${STRIPE_SIGNATURE_TOLERANCE_SECONDS} s from now`;
  return null;
}
