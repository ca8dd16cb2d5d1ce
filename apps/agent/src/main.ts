import { runCli } from './cli';

/** The agent program: `node --import tsx apps/agent/src/main.ts <command>`; see `--help`. */
runCli(process.argv.slice(2), process.env, {
  out: (line) => console.log(line),
  err: (line) => console.error(line),
}).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  },
);
