/**
 * `npm start`: the whole platform on this machine (LOCAL_WORKERS processes), over the embedded engine,
 * or with ENGINE=aws over DynamoDB and S3, in AWS or an emulator (lambdas/local/engine.ts).
 */
import { settings as readSettings, SettingsError } from '../lambdas/shared/settings.js';

// The settings first, before anything else is loaded (a module may read them as it loads) and long
// before anything listens: a bad value stops the start, the primary's and each worker's, with the
// message naming the variable and no stack trace (docs/settings.md).
const refuse = (error: unknown): never => {
  if (!(error instanceof SettingsError)) throw error;
  process.stderr.write(`${error.message}\n`);
  process.exit(1);
};
try {
  readSettings();
} catch (error) {
  refuse(error);
}

const { openLocalEngine, localStateDir } = await import('../lambdas/local/engine.js');
const { bootstrap, credentialsPath, invitationOnServedConsole } = await import('../lambdas/local/bootstrap.js');
const { localRole, localSettings, runBackground, runWorker, startLocalPlatform } = await import('../lambdas/local/workers.js');

const settings = localSettings();
const role = localRole();

if (role === 'http') {
  await runWorker(settings);
} else if (role === 'background') {
  await runBackground();
} else {
  const { workers, backgroundWorkers } = settings;
  const dataDir = localStateDir();
  // The primary bootstraps before any worker starts, so the first start creates one tenant, not one per worker.
  // One process serving the APIs takes its checkpoints off the request path; with workers, each of them does.
  // A setting the chosen engine needs and lacks (ENGINE=aws without TABLE_NAME) stops the start as a bad value does.
  const engine = await openLocalEngine(workers === 1 ? 'thread' : 'auto').catch(refuse);
  const bootstrapped = await bootstrap(engine, dataDir).catch((error: unknown) => {
    // The first call to AWS or an emulator: one that cannot be reached or has no such table is a setup
    // problem to name, not a crash to trace.
    if (engine.name !== 'aws') throw error;
    process.stderr.write(`ENGINE=aws: the first call to the table failed (${error instanceof Error ? error.message : String(error)}); check TABLE_NAME, AWS_REGION, the credentials and AWS_ENDPOINT_URL\n`);
    process.exit(1);
  });
  // With LOCAL_WORKERS=1 the primary serves over this engine; else the workers open their own.
  const running = await startLocalPlatform(settings, engine);

  const { urls } = running;
  const { created } = bootstrapped;
  const credentials = created && running.consoleUrl ? invitationOnServedConsole(dataDir, bootstrapped.credentials, running.consoleUrl) : bootstrapped.credentials;
  const lines = [`console: ${running.consoleUrl}/`, `AI API      ${urls.ai}`, `Data API    ${urls.data}`, `Events API  ${urls.events}`];
  lines.push(`Operations  ${running.opsUrl}  (GET /healthz, GET /readyz, the API reference at /docs and /openapi/{ai,data,events}.json; OPS_PORT)`);
  lines.push(
    `(${workers === 1 ? 'one process serving' : `${workers} worker processes serving`}, LOCAL_WORKERS; ${backgroundWorkers} background process${backgroundWorkers === 1 ? '' : 'es'} for queued work, BACKGROUND_WORKERS)`,
  );
  if (engine.name === 'aws') {
    const { tableName, bucketName } = readSettings();
    lines.push(`Engine aws: DynamoDB table ${tableName}, S3 bucket ${bucketName}; the ports without a setting in ${dataDir}`);
  }
  if (created) {
    lines.push(
      '',
      'Bootstrapped a development tenant (the secret key is shown this once; it is also in',
      `${credentialsPath(dataDir)}, readable by you only):`,
      `  organization_id  ${credentials.organization_id}`,
      `  workspace_id     ${credentials.workspace_id}`,
      `  secret_key       ${credentials.secret_key}`,
      '',
      `The console's owner (${credentials.console_owner_email}) sets a password at this link (once, until ${credentials.console_invitation_expires_at}):`,
      `  ${credentials.console_invitation_url}`,
      `(a new one: npm run admin -- org invite --org ${credentials.organization_id} --email you@example.com --role owner)`,
    );
  } else {
    lines.push('', `Reusing the state in ${dataDir} (credentials in ${credentialsPath(dataDir)}).`);
    // The table may be new (an emulator restarted) while the file stays: the key would then be unknown.
    if (engine.name === 'aws') lines.push('If the table was emptied or recreated since, delete that folder to bootstrap a new tenant.');
  }
  process.stdout.write(lines.join('\n') + '\n');

  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, async () => {
      process.stdout.write(`${signal}: finishing in-flight requests, closing the database\n`);
      await running.close();
      process.exit(0);
    });
  }
}
