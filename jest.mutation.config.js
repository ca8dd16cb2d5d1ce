// The tiers mutation testing runs (stryker.config.mjs). The domain libraries are pure logic with unit
// specs of their own: a mutant there is judged by the unit tier (seconds a mutant); their integration
// specs start real servers for every mutant and made a run take hours on two cores. The adapters are
// judged by their integration specs too: their bugs show only against the real servers.
const { projects } = require('./jest.config');

const scope = process.env.STS_MUTATE ?? '';
const tiers = scope.endsWith('-domain') ? ['unit'] : ['unit', 'integration'];

module.exports = {
  projects: projects.filter((project) => tiers.includes(project.displayName)),
};
