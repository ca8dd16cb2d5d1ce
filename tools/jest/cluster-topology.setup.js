// The cluster tier: the same integration specs, on the local cluster of scripts/infra/ensure-cluster.sh
// (ClickHouse 2 shards x 2 replicas with ZooKeeper, a 3-node NATS JetStream cluster). Set before the
// spec files load, so that testClickHouseDatabase and the specs' NATS_URL read the cluster's addresses,
// which scripts/infra/cluster-nodes.sh names.
const { execFileSync } = require('node:child_process');
const { resolve } = require('node:path');

const cluster = JSON.parse(
  execFileSync('bash', [resolve(__dirname, '../../scripts/infra/cluster-nodes.sh'), 'json'], {
    encoding: 'utf8',
  }),
);
const [first] = cluster.clickhouse.nodes;
process.env.CLICKHOUSE_URL = `http://${first.host}:${first.httpPort}`;
process.env.CLICKHOUSE_CLUSTER = cluster.clickhouse.cluster;
process.env.NATS_URL = cluster.nats.nodes
  .map((node) => `nats://${cluster.host}:${node.clientPort}`)
  .join(',');
process.env.NATS_STREAM_REPLICAS = String(cluster.nats.nodes.length);
