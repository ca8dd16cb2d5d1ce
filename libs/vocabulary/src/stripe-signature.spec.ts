import { STRIPE_SIGNATURE_TOLERANCE_SECONDS, stripeSignatureHeaderProblem } from './stripe-signature';

const NOW = 1_800_000_000;
const V1 = 'a'.repeat(64);

describe('stripeSignatureHeaderProblem', () => {
  it.each([
    `t=${NOW},v1=${V1}`,
    `t=${NOW - STRIPE_SIGNATURE_TOLERANCE_SECONDS},v1=${V1},v1=${'b'.repeat(64)},v0=whatever`,
    `v1=${V1}, t=${NOW + 10}`,
  ])('takes %s', (header) => {
    expect(stripeSignatureHeaderProblem(header, NOW)).toBeNull();
  });

  it.each([
    ['', 'not a list of name=value pairs'],
    ['garbage', 'not a list of name=value pairs'],
    [`v1=${V1}`, 'no timestamp'],
    [`t=${NOW}`, 'no v1 signature'],
    [`t=${NOW},v0=${V1}`, 'no v1 signature'],
    [`t=${NOW},v1=xyz`, 'not 64 hex digits'],
    [`t=${NOW},t=${NOW},v1=${V1}`, 'needs one t='],
    [`t=-5,v1=${V1}`, 'needs one t='],
    [`t=${NOW - STRIPE_SIGNATURE_TOLERANCE_SECONDS - 1},v1=${V1}`, 'more than 300 s from now'],
    [`t=${NOW + STRIPE_SIGNATURE_TOLERANCE_SECONDS + 1},v1=${V1}`, 'more than 300 s from now'],
    [`t=${NOW},v1=${V1},${'x=y,'.repeat(300)}`, 'too long'],
  ])('refuses %j: %s', (header, problem) => {
    expect(stripeSignatureHeaderProblem(header, NOW)).toContain(problem);
  });
});
