/**
 * Preloaded (`node --import tsx --import ./bench/child-agent.ts …`) into every process the benchmark
 * spawns. Inert unless the parent talks to it over the IPC channel:
 * - when the benchmark process goes away (its channel closes, even on SIGKILL), the child stops
 *   itself with SIGTERM, so that no service outlives a run;
 * - `{ type: 'profile-start' }` / `{ type: 'profile-stop', file }` record a V8 CPU profile of exactly
 *   the window between the two messages (unlike `--cpu-prof`, which also records start-up), written
 *   as a `.cpuprofile` file; the child answers `{ type: 'profile-written', file }` or `{ type: 'profile-error' }`;
 * - `{ type: 'gc-watch-start' }` / `{ type: 'gc-watch-stop' }` record the collector's pauses in between
 *   (gc-pauses.ts); the child answers `{ type: 'gc-watching' }`, then `{ type: 'gc-pauses', pauses }`.
 */
import { writeFile } from 'node:fs/promises';
import { Session } from 'node:inspector';
import { watchGcPauses } from './gc-pauses';

type AgentMessage =
  | { type: 'profile-start'; intervalUs?: number }
  | { type: 'profile-stop'; file: string }
  | { type: 'gc-watch-start' }
  | { type: 'gc-watch-stop' };

function post(session: Session, method: string, params?: object): Promise<unknown> {
  return new Promise((resolve, reject) => {
    session.post(method, params ?? {}, (error, result) => (error ? reject(error) : resolve(result)));
  });
}

if (process.send && process.channel) {
  let session: Session | undefined;
  let gcWatch: ReturnType<typeof watchGcPauses> | undefined;
  const reply = (message: object) => process.send?.(message);

  process.on('disconnect', () => process.kill(process.pid, 'SIGTERM'));
  process.on('message', (message: AgentMessage) => {
    void (async () => {
      try {
        if (message.type === 'profile-start') {
          session = new Session();
          session.connect();
          await post(session, 'Profiler.enable');
          await post(session, 'Profiler.setSamplingInterval', { interval: message.intervalUs ?? 1000 });
          await post(session, 'Profiler.start');
          reply({ type: 'profile-started' });
        } else if (message.type === 'profile-stop' && session) {
          const { profile } = (await post(session, 'Profiler.stop')) as { profile: unknown };
          session.disconnect();
          session = undefined;
          await writeFile(message.file, JSON.stringify(profile));
          reply({ type: 'profile-written', file: message.file });
        } else if (message.type === 'gc-watch-start') {
          gcWatch ??= watchGcPauses();
          reply({ type: 'gc-watching' });
        } else if (message.type === 'gc-watch-stop' && gcWatch) {
          const pauses = await gcWatch.stop();
          gcWatch = undefined;
          reply({ type: 'gc-pauses', pauses });
        }
      } catch (error) {
        reply({ type: 'profile-error', message: error instanceof Error ? error.message : String(error) });
      }
    })();
  });
  // The channel must not keep a service alive once it has shut down.
  process.channel.unref();
}
