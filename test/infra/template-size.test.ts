import { describe, expect, it } from 'vitest';
import { ROUTES } from '../../lambdas/http/routes.js';
import { HTTP_APIS, ROUTE_GROUP_STACKS } from '../../lib/http-apis.js';
import { CONSOLE_ROUTE_STACKS, consoleRouteStack, consoleRoutes } from '../../lib/console.js';
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
/**
 * Console routes still to come (console-plan.md's list beyond the 68 in the table: Data's and Events'
 * pages, the activity log), spread over CONSOLE_ROUTE_STACKS templates (docs/decisions/console-aws.md).
 */
const CONSOLE_ROUTES_TO_COME = 40;

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
    // The routes of a group with a nested stack of its own (ROUTE_GROUP_STACKS) are not in their API's template.
    const inTemplate = (api: string) => ROUTES.filter((r) => r.api === api && !ROUTE_GROUP_STACKS.some((g) => g.api === api && g.routes(r))).length;
    const perRoute = Math.max(...HTTP_APIS.map((api) => Math.ceil(nested(api) / inTemplate(api))));
    const projected = nested('ai') + ROUTES_TO_COME * perRoute;
    console.log(`per route: at most ${perRoute} resources; the AI API with ${ROUTES_TO_COME} more routes: ${projected}`);
    expect(projected).toBeLessThan(RESOURCE_LINE);
  });

  it("has the root, one nested stack per HTTP API (and one per route group inside it), the console's, and in it one per group of console routes", () => {
    const routeStacks = [...new Set(consoleRoutes().map((r) => consoleRouteStack(r.id)))].map((i) => `PlatformStack/Console/Stack/Routes${i}`);
    expect(routeStacks.length).toBeGreaterThan(0);
    expect(templates.map((t) => t.path).sort()).toEqual(
      ['PlatformStack', ...HTTP_APIS.map((api) => `PlatformStack/Http/${api[0].toUpperCase()}${api.slice(1)}`), ...Object.values(stack.http.groupStacks).map((s) => s.node.path), 'PlatformStack/Console/Stack', ...routeStacks].sort(),
    );
  });

  it(`leaves each console routes' template room for ${CONSOLE_ROUTES_TO_COME} more console routes at what a route costs today`, () => {
    const stacks = Object.entries(stack.console.routeStacks).map(([i, s]) => ({ i: Number(i), count: templates.find((t) => t.path === s.node.path)!.count }));
    const routesIn = (i: number) => consoleRoutes().filter((r) => consoleRouteStack(r.id) === i).length;
    const perRoute = Math.max(...stacks.map((s) => Math.ceil(s.count / routesIn(s.i))));
    // Spread by the ids' hash, the next routes land anywhere: each stack gets its share, and a quarter more for the unevenness.
    const share = Math.ceil((CONSOLE_ROUTES_TO_COME / CONSOLE_ROUTE_STACKS) * 1.25);
    for (const s of stacks) {
      const projected = s.count + share * perRoute;
      console.log(`console routes ${s.i}: ${routesIn(s.i)} routes, ${s.count} resources; with ${share} more: ${projected}`);
      expect(projected, `console routes ${s.i}`).toBeLessThan(RESOURCE_LINE);
    }
  });
});
