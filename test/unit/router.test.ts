import { describe, expect, it } from 'vitest';
import { Router } from '../../lambdas/http/router.js';
import { ROUTES, type RouteDef } from '../../lambdas/http/routes.js';

const r = (id: string, method: RouteDef['method'], path: string): RouteDef => ({ id, api: 'data', method, path, handler: id, grants: [] });
const table = [
  r('db.put', 'PUT', '/v1/databases/{database}'),
  r('db.list', 'GET', '/v1/databases'),
  r('blob.put', 'PUT', '/v1/databases/{database}/blobs/{sha256}'),
  r('files', 'GET', '/v1/files/{path+}'),
  r('fallback', 'ANY', '$default'),
];

describe('local router', () => {
  const router = new Router('data', table);
  it('matches method and path, decoding parameters', () => {
    expect(router.match('GET', '/v1/databases')).toMatchObject({ route: { id: 'db.list' }, params: {} });
    expect(router.match('PUT', '/v1/databases/shop%2Feu')).toMatchObject({ route: { id: 'db.put' }, params: { database: 'shop/eu' } });
    expect(router.match('PUT', '/v1/databases/a/blobs/ff')).toMatchObject({ route: { id: 'blob.put' }, params: { database: 'a', sha256: 'ff' } });
    expect(router.match('GET', '/v1/files/a/b/c')).toMatchObject({ route: { id: 'files' }, params: { path: 'a/b/c' } });
  });
  it('sends everything else to $default, as API Gateway does', () => {
    for (const [m, p] of [['POST', '/v1/databases'], ['GET', '/v1/databases/'], ['PUT', '/v1/databases/a/b'], ['GET', '/v1/files/'], ['GET', '/']]) {
      expect(router.match(m, p).route.id, `${m} ${p}`).toBe('fallback');
    }
  });
  it('requires a $default route per API', () => {
    expect(() => new Router('ai', table)).toThrow(/no \$default/);
  });
  it('finds every route of the table by a path of its own shape, and no route by a path one segment longer or shorter', () => {
    for (const api of ['ai', 'data', 'events', 'console'] as const) {
      const own = new Router(api, ROUTES);
      for (const route of ROUTES.filter((x) => x.api === api && x.path !== '$default' && x.method !== 'ANY')) {
        const path = route.path.replace(/\{(\w+)\+?\}/g, (_, name: string) => `x-${name}`);
        const found = own.match(route.method, path);
        // An earlier route of the same shape may take it (a literal beside a parameter): then it is of the same method and length.
        expect(found.route.method, `${route.method} ${path}`).toBe(route.method);
        expect(found.route.path.split('/').length, `${route.method} ${path}`).toBe(route.path.split('/').length);
        if (!route.path.includes('+}')) {
          expect(own.match(route.method, `${path}/more`).route.path === route.path, `${route.method} ${path}/more`).toBe(false);
          expect(own.match(route.method, path.slice(0, path.lastIndexOf('/'))).route.path === route.path).toBe(false);
        }
      }
    }
  });
});
