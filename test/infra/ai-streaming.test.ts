/**
 * The AI API's one base URL with its streamed routes (chat, grounded collection chat; lib/ai-edge.ts,
 * docs/decisions/ai-streaming-aws.md): the streaming functions and their function URLs, the
 * distribution's origins and behaviors, the output, the upstream grants (Secrets Manager under the
 * prefix, Bedrock invoke), and cdk-nag.
 */
import { Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it } from 'vitest';
import { ROUTES } from '../../lambdas/http/routes.js';
import { AI_ORIGIN_IDS, STREAMED_ROUTES, STREAM_ROUTE_TAG, pathPattern } from '../../lib/ai-edge.js';
import type { PlatformStack } from '../../lib/platform-stack.js';
import { BEDROCK_ACTIONS } from '../../lib/upstream-grants.js';
import { allowedStatements, expectedEnvNames, routeFunctions, synthStack, taggedFunctions, type RouteFunctionResource, logicalIdIn, flatTemplate, TEST_REGION } from './helpers.js';

let stack: PlatformStack;
let template: Template;
let streamFns: Map<string, RouteFunctionResource>;

const CACHING_DISABLED = '4135ea2d-6df8-44a3-9df3-4b5a84be39ad';
const ALL_VIEWER_EXCEPT_HOST_HEADER = 'b689b0a8-53d0-40ab-baf2-68738e2966ac';

beforeAll(() => {
  ({ stack } = synthStack());
  template = flatTemplate(stack);
  streamFns = taggedFunctions(template, STREAM_ROUTE_TAG);
  expect([...streamFns.keys()].sort()).toEqual(STREAMED_ROUTES.map((r) => r.id).sort());
});

it('streams chat completions, grounded collection chat and OpenAI responses', () => {
  expect(STREAMED_ROUTES.map((r) => r.id).sort()).toEqual(['ai.chat.completions', 'ai.collections.chat', 'ai.responses.create']);
});

const logicalId = (c: { node: { defaultChild?: unknown } }) => logicalIdIn(stack, c);

function aiDistribution(): Record<string, any> {
  const id = logicalId(stack.aiEdge.distribution);
  return (template.findResources('AWS::CloudFront::Distribution')[id] as any).Properties.DistributionConfig;
}

describe.each(STREAMED_ROUTES.map((r) => [r.id, r] as const))('the streaming function of %s', (id, route) => {
  const streamFn = () => streamFns.get(id)!;

  it('is a second function of the route: its streaming entry, its grants, environment and IAM', () => {
    expect(streamFn().props.FunctionName).toBe(`PlatformStack-${id.replaceAll('.', '-')}-stream`);
    expect(streamFn().props.Handler).toBe('index.handler');
    expect(streamFn().props.Timeout).toBe(900);
    expect(Object.keys(streamFn().props.Environment.Variables).sort()).toEqual(expectedEnvNames(route.grants));
    // The same IAM as the route's API Gateway function (resources differ only by its own log group).
    const actions = (fn: RouteFunctionResource) => allowedStatements(template, fn).flatMap((s) => s.actions).sort();
    expect(actions(streamFn())).toEqual(actions(routeFunctions(template).get(id)!));
    // Route functions stay one per route: the streaming one carries its own tag.
    expect([...routeFunctions(template).values()].map((f) => f.logicalId)).not.toContain(streamFn().logicalId);
  });

  it('has a function URL in RESPONSE_STREAM mode, public to invoke (the function authenticates every call)', () => {
    template.hasResourceProperties('AWS::Lambda::Url', {
      TargetFunctionArn: { 'Fn::GetAtt': [streamFn().logicalId, 'Arn'] },
      InvokeMode: 'RESPONSE_STREAM',
      AuthType: 'NONE',
    });
    template.resourceCountIs('AWS::Lambda::Url', STREAMED_ROUTES.length);
    template.hasResourceProperties('AWS::Lambda::Permission', {
      FunctionName: { 'Fn::GetAtt': [streamFn().logicalId, 'Arn'] },
      Action: 'lambda:InvokeFunctionUrl',
      Principal: '*',
      FunctionUrlAuthType: 'NONE',
    });
  });
});

describe('the AI distribution', () => {
  it("sends each streamed route's path to its function URL and everything else to the AI HTTP API, caching nothing", () => {
    const config = aiDistribution();
    const origins = Object.fromEntries((config.Origins as any[]).map((o) => [o.Id, o]));
    expect(Object.keys(origins).sort()).toEqual([AI_ORIGIN_IDS.http, ...STREAMED_ROUTES.map(AI_ORIGIN_IDS.stream)].sort());

    const http = origins[AI_ORIGIN_IDS.http];
    expect(JSON.stringify(http.DomainName)).toContain(`{"Ref":"${logicalId(stack.http.node.findChild('Ai').node.findChild('Api'))}"}`);
    expect(http.CustomOriginConfig).toMatchObject({ OriginProtocolPolicy: 'https-only', OriginSSLProtocols: ['TLSv1.2'] });

    for (const route of STREAMED_ROUTES) {
      const stream = origins[AI_ORIGIN_IDS.stream(route)];
      // The function URL's host: Fn::Select 2 of its URL split on '/'.
      expect(JSON.stringify(stream.DomainName)).toContain(`"Fn::GetAtt":["${logicalId(stack.aiEdge.functionUrls[route.id])}","FunctionUrl"]`);
      expect(stream.CustomOriginConfig).toMatchObject({ OriginProtocolPolicy: 'https-only', OriginSSLProtocols: ['TLSv1.2'], OriginReadTimeout: 60 });
      expect(stream.OriginAccessControlId).toBeUndefined();
    }

    const passThrough = {
      CachePolicyId: CACHING_DISABLED,
      OriginRequestPolicyId: ALL_VIEWER_EXCEPT_HOST_HEADER,
      ViewerProtocolPolicy: 'https-only',
      AllowedMethods: ['GET', 'HEAD', 'OPTIONS', 'PUT', 'PATCH', 'POST', 'DELETE'],
    };
    expect(config.DefaultCacheBehavior).toMatchObject({ TargetOriginId: AI_ORIGIN_IDS.http, ...passThrough });
    const behaviors = Object.fromEntries((config.CacheBehaviors as any[]).map((b) => [b.PathPattern, b]));
    // `/v1/responses` alone: GET and DELETE of `/v1/responses/{id}` stay on the HTTP API.
    expect(Object.keys(behaviors).sort()).toEqual(['/v1/chat/completions', '/v1/collections/*/chat', '/v1/responses']);
    for (const route of STREAMED_ROUTES) expect(behaviors[pathPattern(route.path)], route.id).toMatchObject({ TargetOriginId: AI_ORIGIN_IDS.stream(route), ...passThrough });
  });

  it('outputs its URL as AiUrl', () => {
    const outputs = template.findOutputs('AiUrl');
    expect(Object.keys(outputs)).toEqual(['AiUrl']);
    expect(JSON.stringify(outputs.AiUrl.Value)).toContain(`"Fn::GetAtt":["${logicalId(stack.aiEdge.distribution)}","DomainName"]`);
    expect(Stack.of(stack).resolve(stack.aiEdge.url)['Fn::Join'][1][0]).toBe('https://');
  });
});

describe('rerankers:call', () => {
  it('gives bedrock:Rerank (on *, the only resource IAM takes for it) to the vector query alone, and nothing else with it', () => {
    for (const [id, fn] of routeFunctions(template)) {
      const rerank = allowedStatements(template, fn).filter((s) => s.actions.includes('bedrock:Rerank'));
      if (id !== 'ai.vector.query') {
        expect(rerank, id).toEqual([]);
        continue;
      }
      expect(rerank, id).toEqual([{ actions: ['bedrock:Rerank'], resources: '"*"' }]);
    }
  });
});

describe('upstream-keys:read', () => {
  const holders = ROUTES.filter((r) => r.grants.includes('upstream-keys:read')).map((r) => r.id);

  it('is held by the chat and embeddings routes, and only by AI routes and the console routes that call an upstream as the AI routes do', () => {
    expect(holders).toEqual(expect.arrayContaining(['ai.chat.completions', 'ai.embeddings']));
    // "Try it" (one call through a route) and a vector database's creation (its embeddings route checked, as POST /v1/vector-databases does).
    expect(holders.filter((id) => !id.startsWith('ai.')).sort()).toEqual(['console.routes.try', 'console.vector-database.create']);
  });

  it('reads secrets under <stack>/ai-upstream/ only, and invokes Bedrock models and inference profiles only; others get neither', () => {
    const fns = [...routeFunctions(template), ...[...streamFns].map(([id, fn]) => [`${id} (stream)`, fn] as const)];
    for (const [id, fn] of fns) {
      const statements = allowedStatements(template, fn);
      const upstreamSecrets = statements.filter((s) => s.resources.includes('ai-upstream'));
      const bedrock = statements.filter((s) => s.actions.some((a) => a.startsWith('bedrock:') && a !== 'bedrock:Rerank'));
      if (!holders.includes(id.replace(/ \(stream\)$/, ''))) {
        expect(upstreamSecrets, id).toEqual([]);
        expect(bedrock, id).toEqual([]);
        continue;
      }
      expect(upstreamSecrets, id).toHaveLength(1);
      expect(upstreamSecrets[0].actions, id).toEqual(['secretsmanager:GetSecretValue']);
      expect(JSON.parse(upstreamSecrets[0].resources), id).toEqual({
        'Fn::Join': ['', [`arn:aws:secretsmanager:${TEST_REGION}:`, { Ref: 'AWS::AccountId' }, ':secret:PlatformStack/ai-upstream/*']],
      });
      expect(bedrock, id).toHaveLength(1);
      expect(bedrock[0].actions.sort(), id).toEqual([...BEDROCK_ACTIONS].sort());
      expect(JSON.parse(bedrock[0].resources), id).toEqual([
        'arn:aws:bedrock:*::foundation-model/*',
        { 'Fn::Join': ['', [`arn:aws:bedrock:${TEST_REGION}:`, { Ref: 'AWS::AccountId' }, ':inference-profile/*']] },
      ]);
      // Nothing else of Secrets Manager beyond the server secret (secret:read).
      const otherSecrets = statements.filter((s) => s.actions.some((a) => a.startsWith('secretsmanager:')) && !s.resources.includes('ai-upstream'));
      for (const s of otherSecrets) expect(s.resources, id).toContain(logicalId(stack.secret.secret));
    }
  });
});

describe('cdk-nag AwsSolutions (the whole stack is checked in stack.test.ts)', () => {
  it('the AI edge carries its acknowledgements, with reasons', () => {
    const acks = (path: string) => JSON.stringify(stack.node.findAll().find((c) => c.node.path === path)?.node.metadata ?? []);
    const edge = acks('PlatformStack/AiEdge/Distribution');
    for (const rule of ['CFR1', 'CFR2', 'CFR3', 'CFR4']) expect(edge).toContain(`AwsSolutions-${rule}`);
  });
});
