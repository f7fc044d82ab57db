/**
 * `npm run openapi`: writes docs/openapi/{ai,data,events}.json from the route table and the zod schemas
 * (lambdas/openapi/), and the typed clients' types made from them (clients/typescript/src/generated/).
 * `-- --check` writes nothing and exits 1 when a committed file differs; `-- data` writes one API's;
 * `-- --partial` leaves out routes not documented yet (while writing their docs).
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { APIS } from '../lambdas/shared/api.js';
import { makeDocument } from '../lambdas/openapi/documents.js';
import { clientTypesOf } from './openapi-client-types.js';

const check = process.argv.includes('--check');
const only = process.argv.slice(2).filter((a) => !a.startsWith('--'));
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

for (const api of APIS.filter((a) => only.length === 0 || only.includes(a))) {
  let document: object;
  try {
    document = makeDocument(api, { partial: process.argv.includes('--partial') });
  } catch (error) {
    console.error(`${api}: ${(error as Error).message}`);
    failed = true;
    continue;
  }
  write(`docs/openapi/${api}.json`, JSON.stringify(document, null, 2) + '\n');
  write(`clients/typescript/src/generated/${api}.ts`, await clientTypesOf(api, document));
}
process.exit(failed ? 1 : 0);
