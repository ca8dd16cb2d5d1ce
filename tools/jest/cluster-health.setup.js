// The fault tier: before and after each spec file, the local cluster is checked and repaired
// (scripts/infra/ensure-cluster.sh starts a node that is down and repairs a ClickHouse replica that refuses
// to start), so that a node one file broke can never fail the files after it, nor the next run. What the
// check had to do is printed: a spec that leaves a node down or broken shows in the log.
const { execFile } = require('node:child_process');
const { resolve } = require('node:path');

const ensureCluster = resolve(__dirname, '../../scripts/infra/ensure-cluster.sh');

function checkAndRepairCluster(when) {
  return new Promise((done, fail) => {
    execFile('bash', [ensureCluster], { timeout: 300_000 }, (error, stdout, stderr) => {
      const repaired = stderr
        .split('\n')
        .filter((line) => /refused to start|moved aside|starting |restarting /.test(line));
      if (repaired.length > 0) console.warn(`cluster repaired ${when}:\n${repaired.join('\n')}`);
      if (error) fail(new Error(`the local cluster is not healthy ${when}: ${stderr || error.message}`));
      else done();
    });
  });
}

beforeAll(() => checkAndRepairCluster('before this file'), 300_000);
afterAll(() => checkAndRepairCluster('after this file'), 300_000);
