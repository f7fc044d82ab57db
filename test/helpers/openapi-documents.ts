/** Throwaway OpenAPI documents for the tests of the operations port's serving (the generated ones are checked by their own tests). */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** A minimal valid OpenAPI 3.1 document naming one operation of `api`. */
export const testDocument = (api: string) => ({
  openapi: '3.1.0',
  info: { title: `Test ${api} API`, version: '1.0.0' },
  paths: {
    [`/v1/${api}-widgets`]: {
      get: { operationId: `list_${api}_widgets`, summary: `List the ${api} widgets`, responses: { '200': { description: 'The widgets' } } },
    },
  },
});

/** Writes the documents of `apis` into `dir` as docs/openapi/ holds them (`ai.json`, …). */
export function writeTestDocuments(dir: string, apis: string[]): string {
  for (const api of apis) writeFileSync(join(dir, `${api}.json`), JSON.stringify(testDocument(api), null, 2));
  return dir;
}
