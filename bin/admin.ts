/** `npm run --silent admin -- <command>`: see lambdas/admin/cli.ts and the README. */
import { settings, SettingsError } from '../lambdas/shared/settings.js';

const fail = (message: string, exitCode: number): never => {
  process.stderr.write(JSON.stringify({ error: message }) + '\n');
  process.exit(exitCode);
};

// The settings first, before anything else loads: a bad value stops here, exit code 1, the message
// naming the variable in the CLI's error shape and without a stack trace (docs/settings.md).
try {
  settings();
} catch (error) {
  if (!(error instanceof SettingsError)) throw error;
  fail(error.message, 1);
}

const { openAdminStore } = await import('../lambdas/admin/store.js');
const { helpFor, isUserError, runCommand, UsageError } = await import('../lambdas/admin/cli.js');
const argv = process.argv.slice(2);

let help: string | undefined;
try {
  help = helpFor(argv);
} catch (error) {
  fail((error as Error).message, 2);
}
if (help !== undefined) {
  process.stdout.write(help + '\n');
  process.exit(0);
}

const { engine, warning } = await openAdminStore().catch((error: unknown): never => fail(error instanceof Error ? error.message : String(error), 1));
if (warning) process.stderr.write(JSON.stringify({ warning }) + '\n');
try {
  const result = await runCommand(engine, argv);
  process.stdout.write(JSON.stringify(result, null, 2) + '\n');
} catch (error) {
  // Never a stack trace: an unexpected error (AWS unreachable, no such table, a bug) is named by its
  // kind and message; LOG_LEVEL=debug adds the stack for a bug report.
  const e = error instanceof Error ? error : new Error(String(error));
  const message = isUserError(e) ? e.message : `${e.name}: ${e.message}${engine.name === 'aws' ? ' (check TABLE_NAME, AWS_REGION, the credentials and AWS_ENDPOINT_URL)' : ''}`;
  process.stderr.write(JSON.stringify(settings().logLevel === 'debug' ? { error: message, stack: e.stack } : { error: message }) + '\n');
  process.exitCode = e instanceof UsageError ? 2 : 1;
} finally {
  await engine.close();
}
