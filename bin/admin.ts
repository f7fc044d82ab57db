/** `npm run --silent admin -- <command>`: see lambdas/admin/cli.ts and the README. */
import { settings, SettingsError } from '../lambdas/shared/settings.js';

// The settings first, before anything else loads: a bad value stops here, exit code 1, the message
// naming the variable in the CLI's error shape and without a stack trace (docs/settings.md).
try {
  settings();
} catch (error) {
  if (!(error instanceof SettingsError)) throw error;
  process.stderr.write(JSON.stringify({ error: error.message }) + '\n');
  process.exit(1);
}

const { createEngine } = await import('../lambdas/engine/index.js');
const { isUserError, runCommand, UsageError } = await import('../lambdas/admin/cli.js');

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
