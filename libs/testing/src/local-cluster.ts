import { execFile, execFileSync } from 'node:child_process';
import { resolve } from 'node:path';
import { promisify } from 'node:util';

/** The local cluster of scripts/infra/ensure-cluster.sh, as scripts/infra/cluster-nodes.sh describes it. */
export interface LocalCluster {
  host: string;
  zookeeper: { port: number };
  clickhouse: {
    cluster: string;
    nodes: { name: string; host: string; shard: string; httpPort: number; tcpPort: number }[];
  };
  nats: { cluster: string; nodes: { name: string; serverName: string; clientPort: number }[] };
}

export type LocalClusterNode = string;

const ROOT = resolve(__dirname, '../../..');
const run = promisify(execFile);

let described: LocalCluster | undefined;

/** The nodes, their ports and names (read once from the scripts, the one place that names them). */
export function localCluster(): LocalCluster {
  described ??= JSON.parse(
    execFileSync('bash', [resolve(ROOT, 'scripts/infra/cluster-nodes.sh'), 'json'], { encoding: 'utf8' }),
  ) as LocalCluster;
  return described;
}

/**
 * Acts on one node of the local cluster: `kill` (SIGKILL), `stop` (SIGTERM), `start` (returns once it
 * answers). Nodes: ch-s1-r1 … ch-s2-r2, zookeeper, nats-n1 … nats-n3.
 */
export async function clusterNode(action: 'kill' | 'stop' | 'start', node: LocalClusterNode): Promise<void> {
  await run('bash', [resolve(ROOT, 'scripts/infra/cluster-node.sh'), action, node], { timeout: 120_000 });
}

/** Starts every node that is not running (a test that failed halfway may have left one down). */
export async function startWholeCluster(): Promise<void> {
  await run('bash', [resolve(ROOT, 'scripts/infra/ensure-cluster.sh')], { timeout: 300_000 });
}

export function clickhouseNodeUrl(node: LocalClusterNode): string {
  const found = localCluster().clickhouse.nodes.find((candidate) => candidate.name === node);
  if (!found) throw new Error(`no ClickHouse node ${node} in the local cluster`);
  return `http://${found.host}:${found.httpPort}`;
}

/** NATS_URL of the cluster: every node. */
export function natsClusterUrl(): string {
  const { host, nats } = localCluster();
  return nats.nodes.map((node) => `nats://${host}:${node.clientPort}`).join(',');
}
