/**
 * Does `{ ...row, more: 1 }` give every object a hidden class (map) of its own? On Node 20 it did (39 of 999
 * objects shared the first one's map), which made the device page's young-generation collector copy ~25 KB of maps
 * per page and a lint rule ban such spreads; on Node 24 all 999 share one map, and the rule is gone.
 * Run: `node --allow-natives-syntax bench/spread-hidden-classes.mjs` (prints the Node version and the count).
 */
const haveSameMap = new Function('a', 'b', 'return %HaveSameMap(a, b)');
const row = (i) => ({ id: `d${i}`, orgId: 'o', machineId: 'm', hostname: 'h', status: 1 });
const objects = Array.from({ length: 1000 }, (_, i) => ({
  ...row(i),
  metadataJson: '{}',
  enrolledAt: new Date(),
}));
const shared = objects.slice(1).filter((object) => haveSameMap(objects[0], object)).length;
console.log(
  `${process.version}: ${shared} of ${objects.length - 1} spread objects share the first one's map`,
);
