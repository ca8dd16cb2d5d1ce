import { parseTelemetryBatch } from './telemetry';

describe('parseTelemetryBatch', () => {
  const valid = () => ({
    org_id: 'o',
    device_id: 'd',
    batch_id: 'b',
    received_at: 1_764_000_000_000,
    events: [
      { observed_at: 1_764_000_000_000, host: 'a.example', verdict: 'blocked', classification_ms: 1.5 },
    ],
  });

  it('returns a valid batch as it is', () => {
    const batch = valid();
    expect(parseTelemetryBatch(batch)).toBe(batch);
  });

  it.each([
    ['not an object', null],
    ['no sender', { ...valid(), device_id: '' }],
    ['a fractional time', { ...valid(), received_at: 1.5 }],
    ['no events', { ...valid(), events: [] }],
    ['an unknown verdict', { ...valid(), events: [{ ...valid().events[0], verdict: 'maybe' }] }],
    ['a negative latency', { ...valid(), events: [{ ...valid().events[0], classification_ms: -1 }] }],
    ['a NaN latency', { ...valid(), events: [{ ...valid().events[0], classification_ms: Number.NaN }] }],
    ['a host that is not text', { ...valid(), events: [{ ...valid().events[0], host: 7 }] }],
    ['too many events', { ...valid(), events: Array.from({ length: 5_001 }, () => valid().events[0]) }],
  ])('refuses %s', (_name, value) => {
    expect(() => parseTelemetryBatch(value)).toThrow(TypeError);
  });
});
