/**
 * `npm run openapi`: writes docs/openapi/{ai,data,events}.json from the route table and the zod schemas
 * (lambdas/openapi/). `-- --check` writes nothing and exits 1 when a committed file differs; `-- data`
 * writes one; `-- --partial` leaves out routes not documented yet (while writing their docs).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { APIS } from '../lambdas/shared/api.js';
import { makeDocument } from '../lambdas/openapi/documents.js';

const check = process.argv.includes('--check');
const only = process.argv.slice(2).filter((a) => !a.startsWith('--'));
let failed = false;
for (const api of APIS.filter((a) => only.length === 0 || only.includes(a))) {
  const file = new URL(`../docs/openapi/${api}.json`, import.meta.url);
  let text: string;
  try {
    text = JSON.stringify(makeDocument(api, { partial: process.argv.includes('--partial') }), null, 2) + '\n';
  } catch (error) {
    console.error(`${api}: ${(error as Error).message}`);
    failed = true;
    continue;
  }
  if (check) {
    let committed = '';
    try {
      committed = readFileSync(file, 'utf8');
    } catch {}
    if (committed !== text) {
      console.error(`docs/openapi/${api}.json differs from what npm run openapi makes: run it and commit the result`);
      failed = true;
    }
  } else {
    writeFileSync(file, text);
    console.log(`docs/openapi/${api}.json`);
  }
}
process.exit(failed ? 1 : 0);
