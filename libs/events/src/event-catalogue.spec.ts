import { isEventType, parseEventData } from './event-catalogue';
import { newEnvelope, eventEnvelopeSchema } from './event-envelope';
import { eventSubject, eventTypeFromSubject, eventsStreamName } from './subjects';

describe('event catalogue', () => {
  it('validates event data', () => {
    const data = { org_id: 'o', name: 'Acme', domain: null, created_at: new Date().toISOString() };
    expect(parseEventData('org.created', data)).toEqual(data);
    expect(() => parseEventData('org.created', { ...data, domain: 3 })).toThrow();
  });

  it('names subjects and streams by namespace', () => {
    expect(eventsStreamName('sts')).toBe('STS_EVENTS');
    expect(eventSubject('sts', 'member.joined')).toBe('sts.events.member.joined');
    expect(eventTypeFromSubject('sts', 'sts.events.member.joined')).toBe('member.joined');
    expect(isEventType('member.joined')).toBe(true);
    expect(isEventType('nope')).toBe(false);
  });

  it('wraps data in a valid envelope', () => {
    const envelope = newEnvelope('org.created', { x: 1 });
    expect(eventEnvelopeSchema.parse(envelope)).toEqual(envelope);
  });
});
