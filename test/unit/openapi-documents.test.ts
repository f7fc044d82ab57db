/**
 * The committed API documents (docs/openapi/<api>.json) are what `npm run openapi` makes from the route
 * table and the zod schemas, they lint clean (Redocly's recommended rules, which the client generators
 * rely on), every documented route of the table is in them, and every example validates against its
 * schema (docs/openapi.md).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createConfig, lintFromString } from '@redocly/openapi-core';
import { describe, expect, it } from 'vitest';
import { makeDocument } from '../../lambdas/openapi/documents.js';
import { operationIdOf, undocumented } from '../../lambdas/openapi/document.js';
import { ROUTES } from '../../lambdas/http/routes.js';
import { APIS } from '../../lambdas/shared/api.js';
import { OpenApiChecker } from '../helpers/openapi-check.js';
import { clientTypesOf } from '../../scripts/openapi-client-types.js';

const ROOT = join(import.meta.dirname, '..', '..');
const committed = (api: string) => JSON.parse(readFileSync(join(ROOT, 'docs', 'openapi', `${api}.json`), 'utf8'));

/** Every (schema, example) pair of a document: media types and parameters. */
function examples(doc: any): Array<{ where: string; schema: object; example: unknown }> {
  const out: Array<{ where: string; schema: object; example: unknown }> = [];
  for (const [path, item] of Object.entries<any>(doc.paths)) {
    for (const [method, op] of Object.entries<any>(item)) {
      const media = (content: any, where: string) => {
        for (const [type, m] of Object.entries<any>(content ?? {})) if (m.example !== undefined && m.schema) out.push({ where: `${where} ${type}`, schema: m.schema, example: m.example });
      };
      for (const p of op.parameters ?? []) if (p.example !== undefined) out.push({ where: `${method} ${path} parameter ${p.name}`, schema: p.schema, example: p.example });
      media(op.requestBody?.content, `${method} ${path} request`);
      for (const [status, r] of Object.entries<any>(op.responses)) media(r.content, `${method} ${path} ${status}`);
    }
  }
  return out;
}

describe.each(APIS)('docs/openapi/%s.json', (api) => {
  it('is what npm run openapi makes (run it and commit the result)', () => {
    expect(committed(api)).toEqual(JSON.parse(JSON.stringify(makeDocument(api))));
  });

  it("has the typed client's types made from it (clients/typescript/src/generated)", async () => {
    const file = readFileSync(join(ROOT, 'clients', 'typescript', 'src', 'generated', `${api}.ts`), 'utf8');
    expect(file === (await clientTypesOf(api, committed(api))), 'run npm run openapi and commit the result').toBe(true);
  });

  it('lints clean with Redocly’s recommended rules', async () => {
    const config = await createConfig({ extends: ['recommended'] });
    const problems = await lintFromString({ source: readFileSync(join(ROOT, 'docs', 'openapi', `${api}.json`), 'utf8'), absoluteRef: `${api}.json`, config });
    const found = problems.map((p) => `${p.severity} ${p.ruleId}: ${p.message} at ${p.location?.[0]?.pointer}`);
    // A WebSocket stream answers its upgrade 101 Switching Protocols (RFC 6455), never a 2xx.
    const stream = 'warn operation-2xx-response: Operation must have at least one `2XX` response. at #/paths/~1v1~1workspaces~1{workspace_id}~1subscriptions~1{subscription_id}~1stream/get/responses';
    expect(found.filter((p) => p !== stream)).toEqual([]);
  });

  it('has every route of the table but the fallback and the preflight, by its id', () => {
    const doc = committed(api);
    const ids = Object.values<any>(doc.paths).flatMap((item) => Object.values<any>(item).map((op) => op['x-route-id']));
    expect(ids.sort()).toEqual(ROUTES.filter((r) => r.api === api && !undocumented(r)).map((r) => r.id).sort());
    const operationIds = Object.values<any>(doc.paths).flatMap((item) => Object.values<any>(item).map((op) => op.operationId));
    expect(new Set(operationIds).size).toBe(operationIds.length);
    expect(operationIds.every((id) => /^[a-z][A-Za-z0-9]*$/.test(id))).toBe(true);
    expect(operationIdOf(ROUTES.find((r) => r.api === api && !undocumented(r))!)).toMatch(/^[a-z]/);
  });

  it('lists each error code under its status, in the one error shape', () => {
    const doc = committed(api);
    for (const item of Object.values<any>(doc.paths)) {
      for (const op of Object.values<any>(item)) {
        for (const [status, r] of Object.entries<any>(op.responses)) {
          const schema = r.content?.['application/json']?.schema;
          const codes = schema?.properties?.error?.properties?.code?.enum;
          if (Number(status) >= 400 && codes) expect(codes.length, `${op.operationId} ${status}`).toBeGreaterThan(0);
        }
        expect(Object.keys(op.responses).some((s) => s.startsWith('2') || s === '101'), `${op.operationId} has a success answer`).toBe(true);
      }
    }
  });

  it('has examples, each valid against its schema', () => {
    const doc = committed(api);
    const checker = new OpenApiChecker(api, doc);
    const all = examples(doc);
    expect(all.length).toBeGreaterThan(0);
    const invalid = all.map(({ where, schema, example }) => ({ where, fault: checker.schemaFault(`example ${where}`, schema, example) })).filter((e) => e.fault);
    expect(invalid).toEqual([]);
  });
});
