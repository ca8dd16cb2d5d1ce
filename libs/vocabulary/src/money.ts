/** An amount in the currency's smallest unit (as Stripe gives it), as people read it: "$29.00". */
export function formatMoney(amount: number, currency: string): string {
  try {
    return new Intl.NumberFormat('en', { style: 'currency', currency: currency.toUpperCase() }).format(
      amount / 100,
    );
  } catch {
    return `${amount} ${currency.toUpperCase()}`;
  }
}
