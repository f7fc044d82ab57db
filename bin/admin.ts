/** `npm run --silent admin -- <command>`: see lambdas/admin/cli.ts and the README. */
import { createEngine } from '../lambdas/engine/index.js';
import { isUserError, runCommand, UsageError } from '../lambdas/admin/cli.js';

const engine = await createEngine();
try {
  const result = await runCommand(engine, process.argv.slice(2));
  process.stdout.write(JSON.stringify(result, null, 2) + '\n');
} catch (error) {
  process.stderr.write(JSON.stringify({ error: isUserError(error) ? (error as Error).message : String((error as Error)?.stack ?? error) }) + '\n');
  process.exitCode = error instanceof UsageError ? 2 : 1;
} finally {
  await engine.close();
}
