/**
 * What the route table must account for: every HTTP handler module and every function the stack
 * builds. A route lives in `lambdas/http/routes.ts` or nowhere (docs/architecture.md, "One route table").
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** The modules (under `lambdas/`, no extension) a route table names: each route's handler and streamed handler. */
export interface TableEntry {
  id: string;
  handler: string;
  streamedHandler?: string;
}

export const HANDLERS_DIR = 'http/handlers';
/** Functions the stack builds that are not routes: queue and schedule consumers (lambdas/consumers). */
export const CONSUMERS_DIR = 'consumers';

/** A module that exports `handler` is a Lambda entry; anything else under handlers/ is a helper of handlers. */
const EXPORTS_HANDLER = /^export\s+(?:const|let|async\s+function|function)\s+handler\b|^export\s*\{[^}]*\bhandler\b[^}]*\}/m;

export const namedModules = (table: readonly TableEntry[]) => new Set(table.flatMap((r) => (r.streamedHandler ? [r.handler, r.streamedHandler] : [r.handler])));

/** Handler modules (path under `lambdas/` -> source) that no entry of the table names. */
export function handlersOutsideTable(sources: Record<string, string>, table: readonly TableEntry[]): string[] {
  const named = namedModules(table);
  return Object.entries(sources)
    .filter(([module, text]) => module.startsWith(`${HANDLERS_DIR}/`) && EXPORTS_HANDLER.test(text) && !named.has(module))
    .map(([module]) => module)
    .sort();
}

/** Entries of the table whose module is not a handler module among `sources` (missing, or exporting no `handler`). */
export function tableEntriesWithoutHandler(sources: Record<string, string>, table: readonly TableEntry[]): string[] {
  return [...namedModules(table)].filter((m) => sources[m] === undefined || !EXPORTS_HANDLER.test(sources[m])).sort();
}

/** Entry modules of functions the stack built that are neither named by the table nor a consumer. */
export function functionsOutsideTable(entries: readonly string[], table: readonly TableEntry[]): string[] {
  const named = namedModules(table);
  return entries.filter((m) => !named.has(m) && !m.startsWith(`${CONSUMERS_DIR}/`)).sort();
}

/** The sources under `lambdas/<dir>`, by module path under `lambdas/` without `.ts`. */
export function readModules(root: string, dir: string): Record<string, string> {
  const lambdas = join(root, 'lambdas');
  const walk = (d: string): string[] =>
    readdirSync(join(lambdas, d), { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(`${d}/${e.name}`) : e.name.endsWith('.ts') ? [`${d}/${e.name}`] : []));
  return Object.fromEntries(walk(dir).map((f) => [f.replace(/\.ts$/, ''), readFileSync(join(lambdas, f), 'utf8')]));
}
