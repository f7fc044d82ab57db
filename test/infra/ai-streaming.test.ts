/**
 * The AI API's one base URL with chat streamed (lib/ai-edge.ts, docs/decisions/ai-streaming-aws.md):
 * the streaming function and its function URL, the distribution's origins and behaviors, the output,
 * the upstream grants (Secrets Manager under the prefix, Bedrock invoke), and cdk-nag.
 */
import { Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it } from 'vitest';
import { ROUTES, routeById } from '../../lambdas/http/routes.js';
import { AI_ORIGIN_IDS, STREAMED_ROUTE, STREAM_ROUTE_TAG } from '../../lib/ai-edge.js';
import type { PlatformStack } from '../../lib/platform-stack.js';
import { BEDROCK_ACTIONS } from '../../lib/upstream-grants.js';
import { allowedStatements, expectedEnvNames, routeFunctions, synthStack, taggedFunctions, type RouteFunctionResource, logicalIdIn, flatTemplate, TEST_REGION } from './helpers.js';

let stack: PlatformStack;
let template: Template;
let streamFn: RouteFunctionResource;

const CACHING_DISABLED = '4135ea2d-6df8-44a3-9df3-4b5a84be39ad';
const ALL_VIEWER_EXCEPT_HOST_HEADER = 'b689b0a8-53d0-40ab-baf2-68738e2966ac';

beforeAll(() => {
  ({ stack } = synthStack());
  template = flatTemplate(stack);
  const streaming = taggedFunctions(template, STREAM_ROUTE_TAG);
  expect([...streaming.keys()]).toEqual([STREAMED_ROUTE.id]);
  streamFn = streaming.get(STREAMED_ROUTE.id)!;
});

const logicalId = (c: { node: { defaultChild?: unknown } }) => logicalIdIn(stack, c);

function aiDistribution(): Record<string, any> {
  const id = logicalId(stack.aiEdge.distribution);
  return (template.findResources('AWS::CloudFront::Distribution')[id] as any).Properties.DistributionConfig;
}

describe('the streaming function', () => {
  it('is a second function of the chat route: its streaming entry, its grants, environment and IAM', () => {
    const chat = routeById(STREAMED_ROUTE.id);
    expect(streamFn.props.FunctionName).toBe('PlatformStack-ai-chat-completions-stream');
    expect(streamFn.props.Handler).toBe('index.handler');
    expect(streamFn.props.Timeout).toBe(900);
    expect(Object.keys(streamFn.props.Environment.Variables).sort()).toEqual(expectedEnvNames(chat.grants));
    // The same IAM as the route's API Gateway function (resources differ only by its own log group).
    const actions = (fn: RouteFunctionResource) => allowedStatements(template, fn).flatMap((s) => s.actions).sort();
    expect(actions(streamFn)).toEqual(actions(routeFunctions(template).get(chat.id)!));
    // Route functions stay one per route: the streaming one carries its own tag.
    expect([...routeFunctions(template).values()].map((f) => f.logicalId)).not.toContain(streamFn.logicalId);
  });

  it('has a function URL in RESPONSE_STREAM mode, public to invoke (the function authenticates every call)', () => {
    template.hasResourceProperties('AWS::Lambda::Url', {
      TargetFunctionArn: { 'Fn::GetAtt': [streamFn.logicalId, 'Arn'] },
      InvokeMode: 'RESPONSE_STREAM',
      AuthType: 'NONE',
    });
    template.resourceCountIs('AWS::Lambda::Url', 1);
    template.hasResourceProperties('AWS::Lambda::Permission', {
      FunctionName: { 'Fn::GetAtt': [streamFn.logicalId, 'Arn'] },
      Action: 'lambda:InvokeFunctionUrl',
      Principal: '*',
      FunctionUrlAuthType: 'NONE',
    });
  });
});

describe('the AI distribution', () => {
  it('sends the chat path to the function URL and everything else to the AI HTTP API, caching nothing', () => {
    const config = aiDistribution();
    const origins = Object.fromEntries((config.Origins as any[]).map((o) => [o.Id, o]));
    expect(Object.keys(origins).sort()).toEqual([AI_ORIGIN_IDS.http, AI_ORIGIN_IDS.stream].sort());

    const http = origins[AI_ORIGIN_IDS.http];
    expect(JSON.stringify(http.DomainName)).toContain(`{"Ref":"${logicalId(stack.http.node.findChild('Ai').node.findChild('Api'))}"}`);
    expect(http.CustomOriginConfig).toMatchObject({ OriginProtocolPolicy: 'https-only', OriginSSLProtocols: ['TLSv1.2'] });

    const stream = origins[AI_ORIGIN_IDS.stream];
    // The function URL's host: Fn::Select 2 of its URL split on '/'.
    const urlId = Object.keys(template.findResources('AWS::Lambda::Url'))[0];
    expect(JSON.stringify(stream.DomainName)).toContain(`"Fn::GetAtt":["${urlId}","FunctionUrl"]`);
    expect(stream.CustomOriginConfig).toMatchObject({ OriginProtocolPolicy: 'https-only', OriginSSLProtocols: ['TLSv1.2'], OriginReadTimeout: 60 });
    expect(stream.OriginAccessControlId).toBeUndefined();

    const passThrough = {
      CachePolicyId: CACHING_DISABLED,
      OriginRequestPolicyId: ALL_VIEWER_EXCEPT_HOST_HEADER,
      ViewerProtocolPolicy: 'https-only',
      AllowedMethods: ['GET', 'HEAD', 'OPTIONS', 'PUT', 'PATCH', 'POST', 'DELETE'],
    };
    expect(config.DefaultCacheBehavior).toMatchObject({ TargetOriginId: AI_ORIGIN_IDS.http, ...passThrough });
    expect(config.CacheBehaviors).toHaveLength(1);
    expect(config.CacheBehaviors[0]).toMatchObject({ PathPattern: '/v1/chat/completions', TargetOriginId: AI_ORIGIN_IDS.stream, ...passThrough });
    expect(config.CacheBehaviors[0].PathPattern).toBe(routeById(STREAMED_ROUTE.id).path);
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

  it('is held by the chat and embeddings routes (and only by AI routes)', () => {
    expect(holders).toEqual(expect.arrayContaining(['ai.chat.completions', 'ai.embeddings']));
    expect(holders.filter((id) => !id.startsWith('ai.'))).toEqual([]);
  });

  it('reads secrets under <stack>/ai-upstream/ only, and invokes Bedrock models and inference profiles only; others get neither', () => {
    const fns = [...routeFunctions(template), [`${STREAMED_ROUTE.id} (stream)`, streamFn] as const];
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
