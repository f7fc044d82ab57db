/** Matches a request to a route of one API the way API Gateway does, falling back to the `$default` route. */
import type { RouteApi } from '../shared/api.js';
import type { RouteDef } from './routes.js';

export interface Match {
  route: RouteDef;
  params: Record<string, string>;
}

/** A path segment, parsed once: `{name+}` (the rest of the path), `{name}` (one segment) or a literal. */
type Segment = { kind: 'greedy'; name: string } | { kind: 'param'; name: string } | { kind: 'literal'; value: string };

interface Compiled {
  route: RouteDef;
  segments: Segment[];
}

function compile(path: string): Segment[] {
  return path
    .split('/')
    .slice(1)
    .map((seg): Segment => {
      const greedy = /^\{(\w+)\+\}$/.exec(seg);
      if (greedy) return { kind: 'greedy', name: greedy[1] };
      const param = /^\{(\w+)\}$/.exec(seg);
      return param ? { kind: 'param', name: param[1] } : { kind: 'literal', value: seg };
    });
}

export class Router {
  private readonly routes: Compiled[];
  /** The routes of each method, in table order: a request is matched against its method's only. */
  private readonly byMethod = new Map<string, Compiled[]>();
  private readonly fallback: RouteDef;

  constructor(api: RouteApi, table: readonly RouteDef[]) {
    const own = table.filter((r) => r.api === api);
    const fallback = own.find((r) => r.path === '$default');
    if (!fallback) throw new Error(`the ${api} API has no $default route`);
    this.fallback = fallback;
    this.routes = own.filter((r) => r !== fallback).map((route) => ({ route, segments: compile(route.path) }));
    for (const c of this.routes) this.byMethod.set(c.route.method, [...(this.byMethod.get(c.route.method) ?? []), c]);
  }

  /** `rawPath` is still percent-encoded, so an encoded `/` (%2F) stays inside its segment. */
  match(method: string, rawPath: string): Match {
    const parts = rawPath.split('/').slice(1);
    for (const { route, segments } of this.byMethod.get(method) ?? []) {
      const params = matchSegments(segments, parts);
      if (params) return { route, params };
    }
    return { route: this.fallback, params: {} };
  }

  /** Methods of the routes a path reaches, for a CORS preflight's Access-Control-Allow-Methods. */
  methodsFor(rawPath: string): string[] {
    const parts = rawPath.split('/').slice(1);
    const methods = this.routes.filter(({ route, segments }) => route.method !== 'OPTIONS' && matchSegments(segments, parts)).map(({ route }) => route.method);
    return [...new Set(methods)];
  }
}

function matchSegments(segments: Segment[], parts: string[]): Record<string, string> | undefined {
  // A route without a greedy segment matches only a path of as many segments: most routes end here.
  if (parts.length !== segments.length && segments.at(-1)?.kind !== 'greedy') return undefined;
  let params: Record<string, string> | undefined;
  for (let i = 0; i < segments.length; i++) {
    const seg = segments[i];
    if (seg.kind === 'greedy') {
      const rest = parts.slice(i).join('/');
      if (!rest) return undefined;
      (params ??= {})[seg.name] = safeDecode(rest);
      return params;
    }
    const part = parts[i];
    if (part === undefined || part === '') return undefined;
    if (seg.kind === 'param') (params ??= {})[seg.name] = safeDecode(part);
    else if (seg.value !== part) return undefined;
  }
  return parts.length === segments.length ? (params ?? {}) : undefined;
}

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}
