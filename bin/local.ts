/** `npm start`: the whole platform on this machine, over the embedded engine. */
import { createEmbeddedEngine } from '../lambdas/engine/embedded/index.js';
import { bootstrap, credentialsPath } from '../lambdas/local/bootstrap.js';
import { startPlatform } from '../lambdas/local/platform.js';

const dataDir = process.env.DATA_DIR || '.platform';
const port = (name: string, fallback: number) => Number(process.env[name] ?? fallback);

const engine = createEmbeddedEngine({ dataDir });
const { credentials, created } = await bootstrap(engine, dataDir);
const platform = await startPlatform({
  engine,
  ports: { ai: port('AI_PORT', 8080), data: port('DATA_PORT', 8081), events: port('EVENTS_PORT', 8082) },
});

const lines = [`AI API      ${platform.urls.ai}`, `Data API    ${platform.urls.data}`, `Events API  ${platform.urls.events}`];
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
    await platform.close();
    process.exit(0);
  });
}
