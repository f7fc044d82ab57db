import { describe, expect, it } from 'vitest';
import { ROUTES } from '../../lambdas/http/routes.js';
import { HTTP_APIS } from '../../lib/http-apis.js';
import { stackTemplates, synthStack } from './helpers.js';

/**
 * CloudFormation refuses a template of more than 500 resources, and every template counts alone (a
 * nested stack is one resource of its parent). Each route adds about eight; the line at 60 % keeps
 * room for the routes still to come (docs/decisions/stack-layout.md).
 */
export const RESOURCE_LIMIT = 500;
export const RESOURCE_LINE = RESOURCE_LIMIT * 0.6;
/**
 * Routes still to come, nearly all on the AI API: the 25 the layout was planned for
 * (docs/decisions/stack-layout.md), less the vector database's four, the uploads' four, the
 * collections' four, and the items', query's and grounded chat's ten, now in the table.
 */
const ROUTES_TO_COME = 3;

describe('template size', () => {
  const { stack } = synthStack();
  const templates = stackTemplates(stack).map(({ path, template }) => ({ path, count: Object.keys(template.toJSON().Resources).length }));

  it(`keeps every template, the root and each nested stack, under ${RESOURCE_LINE} resources`, () => {
    console.log(templates.map((t) => `${t.path}: ${t.count} resources`).join('\n'));
    for (const t of templates) expect(t.count, `${t.path} has ${t.count} resources (line: ${RESOURCE_LINE}, limit: ${RESOURCE_LIMIT})`).toBeLessThan(RESOURCE_LINE);
  });

  it(`leaves the AI API's template room for ${ROUTES_TO_COME} more routes at what a route costs today`, () => {
    const nested = (api: string) => templates.find((t) => t.path === `PlatformStack/Http/${api[0].toUpperCase()}${api.slice(1)}`)!.count;
    // An API's template over its routes: what a route costs, its API's own few resources included (an upper bound).
    const perRoute = Math.max(...HTTP_APIS.map((api) => Math.ceil(nested(api) / ROUTES.filter((r) => r.api === api).length)));
    const projected = nested('ai') + ROUTES_TO_COME * perRoute;
    console.log(`per route: at most ${perRoute} resources; the AI API with ${ROUTES_TO_COME} more routes: ${projected}`);
    expect(projected).toBeLessThan(RESOURCE_LINE);
  });

  it('has the root and one nested stack per HTTP API', () => {
    expect(templates.map((t) => t.path).sort()).toEqual(['PlatformStack', ...HTTP_APIS.map((api) => `PlatformStack/Http/${api[0].toUpperCase()}${api.slice(1)}`)].sort());
  });
});
