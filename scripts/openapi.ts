/**
 * `npm run openapi`: writes docs/openapi/{ai,data,events}.json from the route table and the zod schemas
 * (lambdas/openapi/), and the typed clients' types made from them (clients/typescript/src/generated/).
 * `-- --check` writes nothing and exits 1 when a committed file differs; `-- data` writes one API's;
 * `-- --partial` leaves out routes not documented yet (while writing their docs).
 *
 * For a deployment: `-- --out DIR --outputs cdk-outputs.json` writes only the three documents to DIR,
 * each with the deployment's base address (the stack's AiUrl, DataUrl, EventsUrl outputs, as
 * `cdk deploy --outputs-file` writes them) as its first server: what a deployer publishes.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { APIS } from '../lambdas/shared/api.js';
import { makeDocument } from '../lambdas/openapi/documents.js';
import { clientTypesOf } from './openapi-client-types.js';

const args = process.argv.slice(2);
const option = (name: string) => {
  const i = args.indexOf(name);
  return i < 0 ? undefined : args.splice(i, 2)[1];
};
const outDir = option('--out');
const outputsFile = option('--outputs');
const check = args.includes('--check');
const only = args.filter((a) => !a.startsWith('--'));
let failed = false;

function write(path: string, text: string) {
  const file = new URL(`../${path}`, import.meta.url);
  if (check) {
    let committed = '';
    try {
      committed = readFileSync(file, 'utf8');
    } catch {}
    if (committed !== text) {
      console.error(`${path} differs from what npm run openapi makes: run it and commit the result`);
      failed = true;
    }
  } else {
    mkdirSync(new URL('.', file), { recursive: true });
    writeFileSync(file, text);
    console.log(path);
  }
}

/** The stack's outputs, from `cdk deploy --outputs-file` (`{PlatformStack: {AiUrl, …}}`). */
const STACK_OUTPUT: Record<string, string> = { ai: 'AiUrl', data: 'DataUrl', events: 'EventsUrl' };
function writeDeployed(api: string, document: { servers: object[] }) {
  if (!outputsFile) throw new Error('--out needs --outputs <file of cdk deploy --outputs-file>');
  const stacks = JSON.parse(readFileSync(outputsFile, 'utf8')) as Record<string, Record<string, string>>;
  const url = Object.values(stacks).map((o) => o[STACK_OUTPUT[api]]).find(Boolean);
  if (!url) throw new Error(`${outputsFile} has no ${STACK_OUTPUT[api]} output`);
  document.servers = [{ url: url.replace(/\/+$/, ''), description: 'This deployment' }];
  mkdirSync(outDir!, { recursive: true });
  writeFileSync(`${outDir}/${api}.json`, JSON.stringify(document, null, 2) + '\n');
  console.log(`${outDir}/${api}.json`);
}

for (const api of APIS.filter((a) => only.length === 0 || only.includes(a))) {
  let document: object;
  try {
    document = makeDocument(api, { partial: process.argv.includes('--partial') });
  } catch (error) {
    console.error(`${api}: ${(error as Error).message}`);
    failed = true;
    continue;
  }
  if (outDir) {
    writeDeployed(api, document as { servers: object[] });
    continue;
  }
  write(`docs/openapi/${api}.json`, JSON.stringify(document, null, 2) + '\n');
  write(`clients/typescript/src/generated/${api}.ts`, await clientTypesOf(api, document));
}
process.exit(failed ? 1 : 0);
