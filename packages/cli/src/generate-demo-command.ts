import { writeDemoRepository } from './tools/demo-models.js';
import { type Command, UsageError } from './cli-args.js';

export const generateDemo: Command = {
  help: `Usage: visionserve generate-demo <repository-dir>

Writes the demo model repository (half_plus_two, y = 0.5 * x + 2, version 1) into <repository-dir>
and prints the model's base path. More generated fixtures: node scripts/generate-fixtures.mjs <dir>.`,
  async run(argv) {
    const dir = argv[0];
    if (dir === undefined || argv.length > 1)
      throw new UsageError('expects exactly one argument, the repository directory');
    const demo = await writeDemoRepository(dir);
    console.log(demo.basePath);
    return 0;
  },
};
