/** `npm start`: the whole platform on this machine, over the embedded engine (LOCAL_WORKERS processes). */
import { settings as readSettings, SettingsError } from '../lambdas/shared/settings.js';

// The settings first, before anything else is loaded (a module may read them as it loads) and long
// before anything listens: a bad value stops the start, the primary's and each worker's, with the
// message naming the variable and no stack trace (docs/settings.md).
try {
  readSettings();
} catch (error) {
  if (!(error instanceof SettingsError)) throw error;
  process.stderr.write(`${error.message}\n`);
  process.exit(1);
}

const { createEmbeddedEngine } = await import('../lambdas/engine/embedded/index.js');
const { bootstrap, credentialsPath } = await import('../lambdas/local/bootstrap.js');
const { startPlatform } = await import('../lambdas/local/platform.js');
const { isLocalWorker, localSettings, runWorker, startWorkers } = await import('../lambdas/local/workers.js');

const settings = localSettings();

if (isLocalWorker()) {
  await runWorker(settings);
} else {
  const { dataDir, ports, workers } = settings;
  // The primary bootstraps before any worker starts, so the first start creates one tenant, not one per worker.
  // One process serving the APIs takes its checkpoints off the request path; with workers, each of them does.
  const engine = createEmbeddedEngine({ dataDir, checkpoints: workers === 1 ? 'thread' : 'auto' });
  const { credentials, created } = await bootstrap(engine, dataDir);
  let running: { urls: Record<'ai' | 'data' | 'events', string>; close(): Promise<void> };
  if (workers === 1) running = await startPlatform({ engine, ports });
  else {
    await engine.close();
    running = await startWorkers(settings);
  }

  const { urls } = running;
  const lines = [`AI API      ${urls.ai}`, `Data API    ${urls.data}`, `Events API  ${urls.events}`];
  lines.push(`(${workers === 1 ? 'one process' : `${workers} worker processes`}; LOCAL_WORKERS sets how many)`);
  if (created) {
    lines.push(
      '',
      'Bootstrapped a development tenant (the secret key is shown this once; it is also in',
      `${credentialsPath(dataDir)}, readable by you only):`,
      `  organization_id  ${credentials.organization_id}`,
      `  workspace_id     ${credentials.workspace_id}`,
      `  secret_key       ${credentials.secret_key}`,
    );
  } else {
    lines.push('', `Reusing the state in ${dataDir} (credentials in ${credentialsPath(dataDir)}).`);
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
