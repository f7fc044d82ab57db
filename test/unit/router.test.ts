import { describe, expect, it } from 'vitest';
import { Router } from '../../lambdas/http/router.js';
import type { RouteDef } from '../../lambdas/http/routes.js';

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
});
