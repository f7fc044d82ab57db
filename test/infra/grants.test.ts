/**
 * The route table will grow: these routes exercise every grant kind the current table does not use yet,
 * so the IAM, the environment and the cdk-nag acknowledgements for them are proven before they are needed.
 */
import { Template } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import type { RouteDef } from '../../lambdas/http/routes.js';
import { ROUTES, SOCKET_ROUTES } from '../../lambdas/http/routes.js';
import { actionsOf, allowedStatements, expectedEnvNames, routeFunctions, synthStack, flatTemplate } from './helpers.js';

vi.mock('../../lambdas/http/routes.js', async (importOriginal) => {
  const actual = await importOriginal<typeof import('../../lambdas/http/routes.js')>();
  const handler = actual.ROUTES[0].handler; // any module that exists on disk
  const extra: RouteDef[] = [
    { id: 'data.test.blobs-read', api: 'data', method: 'GET', path: '/v1/test/blobs/{key}', handler, grants: ['blobs:read'] },
    { id: 'data.test.blobs-write', api: 'data', method: 'PUT', path: '/v1/test/blobs/{key}', handler, grants: ['table:write', 'blobs:write'] },
    { id: 'events.test.publish', api: 'events', method: 'POST', path: '/v1/test/publish', handler, grants: ['queue:send', 'connections:post'] },
    { id: 'ai.test.ffmpeg', api: 'ai', method: 'POST', path: '/v1/test/ffmpeg', handler, grants: ['table:read', 'ffmpeg:run'] },
  ];
  return { ...actual, ROUTES: [...actual.ROUTES, ...extra] };
});

const route = (id: string) => ROUTES.find((r) => r.id === id)!;
let template: Template;
let stack: ReturnType<typeof synthStack>['stack'];

beforeAll(() => {
  ({ stack } = synthStack());
  template = flatTemplate(stack);
});

describe('every grant kind', () => {
  it('sets only the environment each grant needs', () => {
    const fns = routeFunctions(template);
    for (const id of ['data.test.blobs-read', 'data.test.blobs-write', 'events.test.publish', 'ai.test.ffmpeg']) {
      expect(Object.keys(fns.get(id)!.props.Environment.Variables).sort(), id).toEqual(expectedEnvNames(route(id).grants));
    }
    const urls = JSON.stringify(fns.get('events.test.publish')!.props.Environment.Variables.QUEUE_URLS);
    for (const name of ['webhooks', 'webhooks-dead', 'jobs', 'jobs-dead']) expect(urls).toContain(`\\"${name}\\":`);
  });

  it('blobs:read reads the bucket and cannot write or delete', () => {
    const actions = actionsOf(allowedStatements(template, routeFunctions(template).get('data.test.blobs-read')!));
    expect(actions).toEqual(expect.arrayContaining(['s3:GetObject*', 's3:List*']));
    expect(actions.filter((a) => /^s3:(Put|Delete|Abort)/.test(a))).toEqual([]);
    expect(actions.filter((a) => a.startsWith('dynamodb:'))).toEqual([]);
  });

  it('blobs:write writes without object ACLs; table:write writes the table', () => {
    const actions = actionsOf(allowedStatements(template, routeFunctions(template).get('data.test.blobs-write')!));
    expect(actions).toEqual(expect.arrayContaining(['s3:PutObject', 's3:DeleteObject*', 's3:Abort*', 'dynamodb:PutItem', 'dynamodb:UpdateItem']));
    expect(actions).not.toContain('s3:PutObject*');
    expect(actions).not.toContain('s3:PutObjectAcl');
  });

  it('queue:send sends to the work queues only, not to dead-letter queues', () => {
    const statements = allowedStatements(template, routeFunctions(template).get('events.test.publish')!).filter((s) =>
      s.actions.includes('sqs:SendMessage'),
    );
    const targets = statements.map((s) => s.resources).join(' ');
    for (const [name, { queue, deadLetterQueue }] of Object.entries(stack.queues.byName)) {
      expect(targets, name).toContain(stack.getLogicalId(queue.node.defaultChild as any));
      expect(targets, name).not.toContain(stack.getLogicalId(deadLetterQueue.node.defaultChild as any));
    }
    expect(actionsOf(statements).filter((a) => /Receive|Delete|Purge/.test(a))).toEqual([]);
  });

  it("ffmpeg:run gives the function the stack's ffmpeg layer, FFMPEG_PATH at its ffmpeg, and no IAM", () => {
    const fn = routeFunctions(template).get('ai.test.ffmpeg')!;
    // The AI API's nested stack gets the layer's ARN from the parent (flatTemplate puts the parent's reference back).
    expect(fn.props.Layers).toEqual([{ Ref: stack.getLogicalId(stack.ffmpeg.layer.node.defaultChild as any) }]);
    expect(fn.props.Environment.Variables.FFMPEG_PATH).toBe('/opt/bin/ffmpeg');
    const without = routeFunctions(template).get('events.test.publish')!;
    expect(without.props.Layers).toBeUndefined();
    // Running a program is no AWS call: table:read's grants only.
    expect(actionsOf(allowedStatements(template, fn)).filter((a) => !/^(dynamodb|kms|logs):/.test(a))).toEqual([]);
  });

  it('connections:post on an HTTP route reaches the WebSocket stage', () => {
    const fn = routeFunctions(template).get('events.test.publish')!;
    expect(actionsOf(allowedStatements(template, fn))).toContain('execute-api:ManageConnections');
    expect(JSON.stringify(fn.props.Environment.Variables.CONNECTIONS_ENDPOINT)).toContain('/v1');
  });

  it('secret:read reads the server secret and nothing else of it; routes without it cannot read it', () => {
    const secretId = stack.getLogicalId(stack.secret.secret.node.defaultChild as any);
    const fns = routeFunctions(template);
    const readers = [...ROUTES, ...SOCKET_ROUTES].filter((r) => r.grants.includes('secret:read')).map((r) => r.id);
    // The AI routes that call upstreams hold it too (lambdas/http/routes.ts); the others are listed. The
    // WebSocket function seals each connection's credential (lambdas/events/stream-credential.ts).
    expect(readers.filter((id) => !id.startsWith('ai.') && !id.startsWith('console.')).sort()).toEqual(['data.activity.list', 'data.records.list', 'events.stream.socket', 'events.subscriptions.create', 'events.subscriptions.rotate-secret']);
    // The console's routes that seal list cursors, call upstreams or make signing secrets, as the public routes they stand beside.
    expect(readers.filter((id) => id.startsWith('console.')).sort()).toEqual([
      'console.activity.list', 'console.collections.items.list', 'console.collections.list', 'console.files.list', 'console.knowledge-jobs.list',
      'console.records.list', 'console.routes.try', 'console.subscriptions.create', 'console.subscriptions.rotate-secret', 'console.vector-database.create',
    ]);
    expect(readers).toEqual(expect.arrayContaining(['ai.chat.completions', 'ai.embeddings']));
    for (const [id, fn] of fns) {
      const statements = allowedStatements(template, fn).filter((s) => s.resources.includes(secretId));
      if (readers.includes(id)) {
        expect(actionsOf(statements).sort(), id).toEqual(['secretsmanager:DescribeSecret', 'secretsmanager:GetSecretValue']);
        expect(JSON.stringify(fn.props.Environment.Variables.SERVER_SECRET_ARN), id).toContain(secretId);
      } else {
        expect(statements, id).toEqual([]);
      }
    }
  });
});
