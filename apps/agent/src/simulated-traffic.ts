import type { ReportedEvent } from './telemetry-spool';

const EVERYDAY_HOSTS = [
  'mail.example.com',
  'docs.example.com',
  'www.wikipedia.org',
  'github.com',
  'news.ycombinator.com',
  'www.bbc.co.uk',
  'calendar.example.com',
  'cdn.jsdelivr.net',
  'www.youtube.com',
  'intranet.example.com',
];
const RISKY_HOSTS = ['free-prizes.example.net', 'login-verify.example.org', 'cheap-downloads.example.info'];
const DANGEROUS_HOSTS = [
  'paypa1-secure.example.net',
  'invoice-viewer.example.ru',
  'update-flash.example.top',
  'wallet-drain.example.xyz',
];

/** A small, seedable generator (mulberry32), so a demo can be repeated. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Events as a browser extension would report them: mostly allowed everyday sites, a few percent warned
 * and about one percent blocked, classification latencies around 10–40 ms with a long tail, spread over
 * [from, to) with more traffic in working hours (UTC).
 */
export function simulatedEvents(count: number, from: Date, to: Date, random: () => number): ReportedEvent[] {
  const events: ReportedEvent[] = [];
  const span = Math.max(1, to.getTime() - from.getTime());
  while (events.length < count) {
    const at = from.getTime() + Math.floor(random() * span);
    const hour = new Date(at).getUTCHours();
    // Keep nights quieter: accept an off-hours moment one time in four.
    if ((hour < 7 || hour > 19) && random() > 0.25) continue;
    const roll = random();
    const [verdict, hosts] =
      roll < 0.012
        ? (['blocked', DANGEROUS_HOSTS] as const)
        : roll < 0.06
          ? (['warned', RISKY_HOSTS] as const)
          : (['allowed', EVERYDAY_HOSTS] as const);
    const host = hosts[Math.floor(random() * hosts.length)]!;
    const latency = 8 + random() * 30 + (random() < 0.05 ? random() * 400 : 0);
    events.push({
      observed_at: new Date(at).toISOString(),
      url: `https://${host}/${Math.floor(random() * 1000)}`,
      verdict,
      classification_ms: Math.round(latency * 10) / 10,
    });
  }
  return events.sort((a, b) => a.observed_at.localeCompare(b.observed_at));
}
