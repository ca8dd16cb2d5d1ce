/**
 * An amount in the currency's smallest unit (as Stripe gives it), as people read it: 2900 usd is
 * "$29.00", 5000 jpy is "¥5,000" (a currency without minor units is not divided).
 */
export function formatMoney(amount: number, currency: string): string {
  try {
    const format = new Intl.NumberFormat('en', { style: 'currency', currency: currency.toUpperCase() });
    return format.format(amount / 10 ** (format.resolvedOptions().maximumFractionDigits ?? 2));
  } catch {
    return `${amount} ${currency.toUpperCase()}`;
  }
}
