import { formatMoney } from './money';

describe('formatMoney', () => {
  it('divides by the minor units of the currency', () => {
    expect(formatMoney(2900, 'usd')).toBe('$29.00');
    expect(formatMoney(5000, 'JPY')).toBe('¥5,000');
    expect(formatMoney(1234, 'eur')).toBe('€12.34');
  });

  it('falls back to the plain amount for a code Intl does not take', () => {
    expect(formatMoney(100, 'x1!')).toBe('100 X1!');
  });
});
