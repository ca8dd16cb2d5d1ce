/**
 * Fills an organization with realistic telemetry, so a dashboard has something to show:
 *   npm run demo -- --token <admin access token> [--server http://localhost:8080] [--devices 20]
 *                   [--days 7] [--events-per-day 300] [--seed 1]
 * Enrolls the devices through the public API (with the organization's enrollment key, created if it
 * has none) and sends each device `--days` days' worth of traffic through POST /api/device/telemetry,
 * exactly as agents would. Analytics counts only what a device observed since its enrollment
 * (docs/decisions.md, "No telemetry from before a device existed"), so the traffic is observed between
 * the enrollment and now: it lands in the current hour. Prints progress; safe to run again (new devices
 * each time).
 */
import { parseArgs } from 'node:util';
import { seededRandom, simulatedEvents } from '../apps/agent/src/simulated-traffic';

const { values } = parseArgs({
  options: {
    token: { type: 'string' },
    server: { type: 'string', default: process.env.STS_SERVER_URL ?? 'http://localhost:8080' },
    devices: { type: 'string', default: '20' },
    days: { type: 'string', default: '7' },
    'events-per-day': { type: 'string', default: '300' },
    seed: { type: 'string', default: '1' },
  },
});

function count(name: string, value: string | undefined, max: number): number {
  const parsed = Number(value);
  if (!Number.isInteger(parsed) || parsed < 1 || parsed > max) {
    console.error(`demo: --${name} must be a whole number from 1 to ${max}`);
    process.exit(2);
  }
  return parsed;
}

const token = values.token ?? process.env.TOKEN;
if (!token) {
  console.error(
    'demo: pass --token <admin access token> (e.g. TOKEN=$(npm run --silent token -- admin@example.com))',
  );
  process.exit(2);
}
const server = values.server.replace(/\/+$/, '');
const devices = count('devices', values.devices, 1_000);
const days = count('days', values.days, 29);
const perDay = count('events-per-day', values['events-per-day'], 100_000);
const random = seededRandom(count('seed', values.seed, 2 ** 31));

async function call<T>(
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<T> {
  const response = await fetch(`${server}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      ...headers,
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${path}: HTTP ${response.status} ${text.slice(0, 300)}`);
  return (text ? JSON.parse(text) : undefined) as T;
}

async function enrollmentKey(): Promise<string> {
  const response = await fetch(`${server}/api/enrollment-key`, {
    headers: { authorization: `Bearer ${token}` },
  });
  if (response.ok) return ((await response.json()) as { key: string }).key;
  return (await call<{ key: string }>('POST', '/api/enrollment-key')).key;
}

async function main(): Promise<void> {
  const session = await call<{ org: { name: string } }>('GET', '/api/session');
  const key = await enrollmentKey();
  const run = Date.now().toString(36);
  // Analytics allows a device's clock to run up to 5 minutes behind its enrollment; stay within a minute.
  const enrolledFrom = new Date(Date.now() - 60_000);
  const enrolled: { device_token: string; hostname: string }[] = [];
  for (let offset = 0; offset < devices; offset += 100) {
    const { codes } = await call<{ codes: { code: string }[] }>('POST', '/api/enrollment-codes', {
      count: Math.min(100, devices - offset),
    });
    for (const [i, { code }] of codes.entries()) {
      const hostname = `demo-${run}-${String(offset + i + 1).padStart(3, '0')}`;
      const device = await call<{ device_token: string }>(
        'POST',
        '/api/device/enroll',
        { code, machine_id: `${hostname}-machine`, hostname, metadata: { os: 'linux', demo: true } },
        { 'x-enrollment-key': key },
      );
      enrolled.push({ device_token: device.device_token, hostname });
    }
  }
  console.log(`enrolled ${enrolled.length} devices in "${session.org.name}"`);

  const to = new Date();
  const from = enrolledFrom;
  let sent = 0;
  for (const [index, device] of enrolled.entries()) {
    const events = simulatedEvents(perDay * days, from, to, random);
    for (let start = 0; start < events.length; start += 5_000) {
      await call(
        'POST',
        '/api/device/telemetry',
        { batch_id: `${device.hostname}-${start}`, events: events.slice(start, start + 5_000) },
        { 'x-device-token': device.device_token },
      );
    }
    sent += events.length;
    if ((index + 1) % 10 === 0 || index + 1 === enrolled.length) {
      console.log(`sent ${sent} events for ${index + 1}/${enrolled.length} devices`);
    }
  }
  console.log(`done: ${sent} events (${days} days' worth, observed since the enrollment). Try:`);
  console.log(
    `  curl -s -H "Authorization: Bearer $TOKEN" '${server}/api/analytics/series?metric=total_analyzed&window=24h'`,
  );
}

main().catch((error: unknown) => {
  console.error(`demo: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
