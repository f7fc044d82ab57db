/**
 * The Data distribution (lib/data-edge.ts): the Data API's URL, whose file paths run the upload relay
 * as a Lambda@Edge origin-request function; in us-east-1 in the stack, elsewhere in a stack of its own.
 */
import { App, Stack, Validations } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { CachePolicy, OriginRequestPolicy } from 'aws-cdk-lib/aws-cloudfront';
import { AwsSolutionsChecks } from 'cdk-nag';
import { beforeAll, describe, expect, it } from 'vitest';
import { Router } from '../../lambdas/http/router.js';
import { ROUTES } from '../../lambdas/http/routes.js';
import { DATA_ORIGIN_ID, EDGE_TAG, FILE_PATH_PATTERN } from '../../lib/data-edge.js';
import { PlatformStack } from '../../lib/platform-stack.js';
import { CDK_JSON_CONTEXT, flatTemplate, logicalIdIn, NO_BUNDLING, synthStack } from './helpers.js';

let stack: PlatformStack;
let template: Template;
beforeAll(() => {
  ({ stack } = synthStack());
  template = flatTemplate(stack);
});

const config = () => (template.findResources('AWS::CloudFront::Distribution')[logicalIdIn(stack, stack.dataEdge.distribution)] as { Properties: { DistributionConfig: any } }).Properties.DistributionConfig;

describe('the Data distribution', () => {
  it("is data_url: DataUrl names it, and it passes every request to the Data HTTP API, caching nothing and forwarding every viewer header but Host", () => {
    expect(stack.resolve(template.findOutputs('DataUrl').DataUrl.Value)).toEqual({ 'Fn::Join': ['', ['https://', { 'Fn::GetAtt': [logicalIdIn(stack, stack.dataEdge.distribution), 'DomainName'] }]] });
    const c = config();
    expect(c.Origins.map((o: { Id: string }) => o.Id)).toEqual([DATA_ORIGIN_ID]);
    for (const behavior of [c.DefaultCacheBehavior, ...c.CacheBehaviors]) {
      expect(behavior.TargetOriginId).toBe(DATA_ORIGIN_ID);
      expect(behavior.CachePolicyId).toBe(CachePolicy.CACHING_DISABLED.cachePolicyId);
      expect(behavior.OriginRequestPolicyId).toBe(OriginRequestPolicy.ALL_VIEWER_EXCEPT_HOST_HEADER.originRequestPolicyId);
      expect(behavior.AllowedMethods).toContain('PUT');
    }
  });

  it('runs the relay on the file paths only, at origin request, and those paths are exactly where the file routes are', () => {
    const c = config();
    expect(c.DefaultCacheBehavior.LambdaFunctionAssociations).toBeUndefined();
    expect(c.CacheBehaviors.map((b: { PathPattern: string }) => b.PathPattern)).toEqual([FILE_PATH_PATTERN]);
    const [association] = c.CacheBehaviors[0].LambdaFunctionAssociations;
    expect(association.EventType).toBe('origin-request');
    expect(association.IncludeBody ?? false).toBe(false);
    // Every route that takes a file's bytes is under the pattern; as a regular expression it covers no JSON route's path.
    const pattern = new RegExp(`^${FILE_PATH_PATTERN.replace(/\*/g, '[^?]*')}$`);
    const streamed = ROUTES.filter((r) => r.api === 'data' && r.body === 'stream');
    expect(streamed.length).toBeGreaterThanOrEqual(2);
    const router = new Router('data', ROUTES);
    for (const r of streamed) expect(pattern.test(r.path.replace(/\{[^}]+\}/g, 'x')), r.id).toBe(true);
    expect(router.match('PUT', '/v1/databases/db/blobs/abc').route.id).toBe('data.blobs.put');
  });

  it('builds the relay as Lambda@Edge wants it: Node.js on x86_64, no environment, 30 s, a version, and no alarm of ours', () => {
    const fns = template.findResources('AWS::Lambda::Function', { Properties: { Tags: [{ Key: EDGE_TAG, Value: 'data-upload-relay' }] } });
    const [relay] = Object.values(fns) as { Properties: Record<string, any> }[];
    expect(Object.keys(fns)).toHaveLength(1);
    expect(relay.Properties.Runtime).toMatch(/^nodejs2\d\.x$/);
    expect(relay.Properties.Architectures ?? ['x86_64']).toEqual(['x86_64']);
    expect(relay.Properties.Environment).toBeUndefined();
    expect(relay.Properties.Timeout).toBe(30);
    const role = template.toJSON().Resources[relay.Properties.Role['Fn::GetAtt'][0]];
    const principals = JSON.stringify(role.Properties.AssumeRolePolicyDocument);
    expect(principals).toContain('edgelambda.amazonaws.com');
    const alarms = JSON.stringify(template.findResources('AWS::CloudWatch::Alarm'));
    expect(alarms).not.toContain(Object.keys(fns)[0]);
  });
});

describe('in another region than us-east-1', () => {
  it('puts the relay in a PlatformStack-edge-<region> stack in us-east-1, and both templates pass cdk-nag', () => {
    const app = new App({ context: { ...CDK_JSON_CONTEXT, ...NO_BUNDLING } });
    const platform = new PlatformStack(app, 'PlatformStack', { env: { region: 'eu-west-1', account: '123456789012' } });
    Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
    const assembly = app.synth(); // cdk-nag findings fail the synthesis
    const edge = app.node.children.find((c): c is Stack => Stack.isStack(c) && c !== platform)!;
    expect(edge.stackName).toBe('PlatformStack-edge-eu-west-1');
    expect(edge.region).toBe('us-east-1');
    const edgeTemplate = assembly.getStackByName('PlatformStack-edge-eu-west-1').template as { Resources: Record<string, { Type: string }> };
    expect(Object.values(edgeTemplate.Resources).filter((r) => r.Type === 'AWS::Lambda::Function')).toHaveLength(1);
    expect(Template.fromStack(platform).findResources('AWS::Lambda::Function', { Properties: { Tags: [{ Key: EDGE_TAG }] } })).toEqual({});
  });
});
