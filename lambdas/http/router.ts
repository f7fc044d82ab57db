/** Matches a request to a route of one API the way API Gateway does, falling back to the `$default` route. */
import type { RouteApi } from '../shared/api.js';
import type { RouteDef } from './routes.js';

export interface Match {
  route: RouteDef;
  params: Record<string, string>;
}

interface Compiled {
  route: RouteDef;
  segments: string[];
}

export class Router {
  private readonly routes: Compiled[];
  private readonly fallback: RouteDef;

  constructor(api: RouteApi, table: readonly RouteDef[]) {
    const own = table.filter((r) => r.api === api);
    const fallback = own.find((r) => r.path === '$default');
    if (!fallback) throw new Error(`the ${api} API has no $default route`);
    this.fallback = fallback;
    this.routes = own.filter((r) => r !== fallback).map((route) => ({ route, segments: route.path.split('/').slice(1) }));
  }

  /** `rawPath` is still percent-encoded, so an encoded `/` (%2F) stays inside its segment. */
  match(method: string, rawPath: string): Match {
    const parts = rawPath.split('/').slice(1);
    for (const { route, segments } of this.routes) {
      if (route.method !== method) continue;
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

function matchSegments(segments: string[], parts: string[]): Record<string, string> | undefined {
  const params: Record<string, string> = {};
  for (let i = 0; i < segments.length; i++) {
    const seg = segments[i];
    const greedy = /^\{(\w+)\+\}$/.exec(seg);
    if (greedy) {
      const rest = parts.slice(i).join('/');
      if (!rest) return undefined;
      params[greedy[1]] = safeDecode(rest);
      return params;
    }
    const part = parts[i];
    if (part === undefined || part === '') return undefined;
    const param = /^\{(\w+)\}$/.exec(seg);
    if (param) params[param[1]] = safeDecode(part);
    else if (seg !== part) return undefined;
  }
  return parts.length === segments.length ? params : undefined;
}

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}
