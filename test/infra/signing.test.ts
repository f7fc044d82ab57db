/**
 * The token signing key: an asymmetric KMS key that every function may read the public key of (to
 * verify tokens) and only `signing:sign` functions may sign with. A test route with that grant is
 * added, so this holds whether or not the route table uses the grant yet.
 */
import { Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import type { RouteDef } from '../../lambdas/http/routes.js';
import { ROUTES, SOCKET_ROUTES } from '../../lambdas/http/routes.js';
import { ENV } from '../../lambdas/shared/settings.js';
import type { PlatformStack } from '../../lib/platform-stack.js';
import { allowedStatements, routeFunctions, synthStack, flatTemplate } from './helpers.js';

vi.mock('../../lambdas/http/routes.js', async (importOriginal) => {
  const actual = await importOriginal<typeof import('../../lambdas/http/routes.js')>();
  const handler = actual.ROUTES[0].handler; // any module that exists on disk
  const extra: RouteDef[] = [
    { id: 'data.test.sign', api: 'data', method: 'POST', path: '/v1/test/sign', handler, grants: ['table:read', 'signing:sign'] },
  ];
  return { ...actual, ROUTES: [...actual.ROUTES, ...extra] };
});

const ALL_ROUTES = [...ROUTES, ...SOCKET_ROUTES];
let stack: PlatformStack;
let template: Template;
let keyId: string;
/** How the key's ARN appears in the template. */
let keyArn: string;

beforeAll(() => {
  ({ stack } = synthStack());
  template = flatTemplate(stack);
  keyId = stack.getLogicalId(stack.signing.key.node.defaultChild as any);
  keyArn = JSON.stringify({ 'Fn::GetAtt': [keyId, 'Arn'] });
});

/** The KMS actions a function's role is allowed, each with the statement's resources. */
function kmsGrants(routeId: string) {
  return allowedStatements(template, routeFunctions(template).get(routeId)!).flatMap((s) =>
    s.actions.filter((a) => a.startsWith('kms:')).map((action) => ({ action, resources: s.resources })),
  );
}

describe('token signing key', () => {
  it('is one asymmetric P-256 signing key, kept when the stack is deleted', () => {
    // The only signing key; the other key of the stack encrypts the alarm topic (test/infra/operations.test.ts).
    const signingKeys = Object.values(template.findResources('AWS::KMS::Key')).filter((k: any) => k.Properties.KeyUsage === 'SIGN_VERIFY');
    expect(signingKeys).toHaveLength(1);
    const key = template.findResources('AWS::KMS::Key')[keyId] as any;
    expect(key.Properties.KeySpec).toBe('ECC_NIST_P256');
    expect(key.Properties.KeyUsage).toBe('SIGN_VERIFY');
    expect(key.Properties.EnableKeyRotation ?? false).toBe(false);
    expect(key.DeletionPolicy).toBe('Retain');
    expect(key.UpdateReplacePolicy).toBe('Retain');
  });

  it('gives every function SIGNING_KEY_IDS: a JSON array holding the key ARN', () => {
    const fns = routeFunctions(template);
    expect(fns.size).toBe(ALL_ROUTES.length);
    for (const route of ALL_ROUTES) {
      const value = fns.get(route.id)!.props.Environment.Variables[ENV.signingKeyIds];
      expect(value, route.id).toEqual({ 'Fn::Join': ['', ['["', { 'Fn::GetAtt': [keyId, 'Arn'] }, '"]']] });
    }
    // Resolved, it parses as the array the AWS engine expects.
    const resolved = Stack.of(stack).resolve(stack.signing.keyIdsJson())['Fn::Join'][1] as unknown[];
    expect(JSON.parse(resolved.map((p) => (typeof p === 'string' ? p : 'arn:aws:kms:r:1:key/k')).join(''))).toEqual(['arn:aws:kms:r:1:key/k']);
  });

  it('lets every function read the public key, on this key only', () => {
    for (const route of ALL_ROUTES) {
      const grants = kmsGrants(route.id).filter((g) => g.action === 'kms:GetPublicKey');
      expect(grants, route.id).toHaveLength(1);
      expect(grants[0].resources, route.id).toBe(keyArn);
    }
  });

  it('lets only signing:sign functions sign, on this key only; no other KMS action anywhere', () => {
    const signing = ALL_ROUTES.filter((r) => r.grants.includes('signing:sign'));
    const others = ALL_ROUTES.filter((r) => !r.grants.includes('signing:sign'));
    expect(signing.map((r) => r.id)).toContain('data.test.sign');
    expect(others.length).toBeGreaterThan(0);
    for (const route of signing) {
      const sign = kmsGrants(route.id).filter((g) => g.action === 'kms:Sign');
      expect(sign, route.id).toHaveLength(1);
      expect(sign[0].resources, route.id).toBe(keyArn);
    }
    for (const route of others) expect(kmsGrants(route.id).map((g) => g.action), route.id).not.toContain('kms:Sign');
    for (const route of ALL_ROUTES) {
      for (const g of kmsGrants(route.id)) expect(['kms:GetPublicKey', 'kms:Sign'], `${route.id} ${g.action}`).toContain(g.action);
    }
  });
});
