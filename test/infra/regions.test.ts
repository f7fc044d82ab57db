/**
 * What a deploy into a new account and region needs of the templates (issue 33, B2, B3, B5, B6): the
 * API Gateway account-wide CloudWatch role only on request, synthesis only for regions with S3
 * Vectors, names that are global to the account carrying the region, and the Lambda@Edge replicas'
 * log group with retention.
 */
import { App, Stack, Validations } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { AwsSolutionsChecks } from 'cdk-nag';
import { describe, expect, it } from 'vitest';
import { EDGE_TAG } from '../../lib/data-edge.js';
import { PlatformStack } from '../../lib/platform-stack.js';
import { API_GATEWAY_CLOUDWATCH_ROLE_CONTEXT } from '../../lib/socket-api.js';
import { S3_VECTORS_REGIONS } from '../../lib/vector-bucket.js';
import { CDK_JSON_CONTEXT, nagFindings, NO_BUNDLING } from './helpers.js';

const ACCOUNT = '123456789012';
/** Each synthesis takes seconds, many more on a loaded machine. */
const SYNTH_TIMEOUT = 240_000;

function synth(region: string, context: Record<string, unknown> = {}, opts: { nag?: boolean } = {}) {
  const app = new App({ context: { ...CDK_JSON_CONTEXT, ...NO_BUNDLING, ...context } });
  const platform = new PlatformStack(app, 'PlatformStack', { env: { region, account: ACCOUNT } });
  if (opts.nag) Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
  const edge = app.node.children.find((c): c is Stack => Stack.isStack(c) && c !== platform);
  return { app, platform, edge };
}

type Resource = { Type: string; Properties: Record<string, any>; DependsOn?: string[] };
const resources = (stack: Stack, type: string) => Object.entries(Template.fromStack(stack).findResources(type) as Record<string, Resource>);
const socketStage = (platform: PlatformStack) => resources(platform, 'AWS::ApiGatewayV2::Stage').map(([, r]) => r).find((r) => r.Properties.StageName === 'v1')!;

describe("API Gateway's account-wide CloudWatch role (context apiGatewayCloudWatchRole)", () => {
  it('is left alone by default: no AWS::ApiGateway::Account, no role for it, and the WebSocket stage writes no access logs', () => {
    const { platform } = synth('us-east-1');
    expect(resources(platform, 'AWS::ApiGateway::Account')).toEqual([]);
    expect(JSON.stringify(Template.fromStack(platform).findResources('AWS::IAM::Role'))).not.toContain('AmazonAPIGatewayPushToCloudWatchLogs');
    expect(socketStage(platform).Properties.AccessLogSettings).toBeUndefined();
  }, SYNTH_TIMEOUT);

  it('=existing: the WebSocket stage writes access logs, and the stack still sets no account role', () => {
    const { platform } = synth('us-east-1', { [API_GATEWAY_CLOUDWATCH_ROLE_CONTEXT]: 'existing' });
    expect(resources(platform, 'AWS::ApiGateway::Account')).toEqual([]);
    expect(socketStage(platform).Properties.AccessLogSettings).toMatchObject({ DestinationArn: expect.anything(), Format: expect.stringContaining('$context.connectionId') });
  }, SYNTH_TIMEOUT);

  it('=create: sets the role, retained, after the role exists (DependsOn), before the stage; nag-clean', () => {
    const { app, platform } = synth('us-east-1', { [API_GATEWAY_CLOUDWATCH_ROLE_CONTEXT]: 'create' }, { nag: true });
    expect(nagFindings(app)).toEqual([]);
    const template = Template.fromStack(platform).toJSON() as { Resources: Record<string, Resource & { DeletionPolicy?: string }> };
    const accounts = Object.entries(template.Resources).filter(([, r]) => r.Type === 'AWS::ApiGateway::Account');
    expect(accounts).toHaveLength(1);
    const [accountId, account] = accounts[0];
    const roleId = account.Properties.CloudWatchRoleArn['Fn::GetAtt'][0] as string;
    expect(template.Resources[roleId].Type).toBe('AWS::IAM::Role');
    expect(JSON.stringify(template.Resources[roleId].Properties.ManagedPolicyArns)).toContain('AmazonAPIGatewayPushToCloudWatchLogs');
    expect(account.DependsOn).toContain(roleId);
    expect(account.DeletionPolicy).toBe('Retain');
    expect(template.Resources[roleId].DeletionPolicy).toBe('Retain');
    const [stageId] = Object.entries(template.Resources).find(([, r]) => r.Type === 'AWS::ApiGatewayV2::Stage' && r.Properties.StageName === 'v1')!;
    expect(template.Resources[stageId].DependsOn).toContain(accountId);
    expect(template.Resources[stageId].Properties.AccessLogSettings).toBeDefined();
  }, SYNTH_TIMEOUT);

  it('refuses any other value, naming the ones it takes', () => {
    expect(() => synth('us-east-1', { [API_GATEWAY_CLOUDWATCH_ROLE_CONTEXT]: 'true' })).toThrow(/apiGatewayCloudWatchRole="true": must be one of none, existing, create/);
  }, SYNTH_TIMEOUT);
});

describe('regions', () => {
  it('synthesizes for a region with S3 Vectors', () => {
    expect(S3_VECTORS_REGIONS).toContain('eu-central-1');
    const { platform } = synth('eu-central-1');
    expect(resources(platform, 'AWS::S3Vectors::VectorBucket')).toHaveLength(1);
  }, SYNTH_TIMEOUT);

  it('refuses a region without S3 Vectors at synthesis, naming the regions that work', () => {
    for (const region of ['sa-east-1', 'us-west-1', 'af-south-1']) {
      expect(S3_VECTORS_REGIONS as readonly string[]).not.toContain(region);
      expect(() => synth(region)).toThrow(new RegExp(`S3 Vectors is not offered in ${region}.*deploy to one of ${S3_VECTORS_REGIONS.join(', ')}`));
    }
  }, SYNTH_TIMEOUT);
});

describe('names global to the account carry the region, so two regions of one account deploy side by side', () => {
  const dashboard = (platform: PlatformStack) => resources(platform, 'AWS::CloudWatch::Dashboard').map(([, r]) => r.Properties.DashboardName);
  // The edge stack holds the relay only; in us-east-1 the relay is the function tagged EDGE_TAG.
  const edgeFunctionNames = (stack: Stack) =>
    resources(stack, 'AWS::Lambda::Function')
      .filter(([, r]) => stack.stackName.includes('-edge-') || (r.Properties.Tags ?? []).some((t: { Key: string }) => t.Key === EDGE_TAG))
      .map(([, r]) => r.Properties.FunctionName);

  it('the dashboard, the edge stack and the edge function', () => {
    const west = synth('eu-west-1');
    const central = synth('eu-central-1');
    expect(dashboard(west.platform)).toEqual(['PlatformStack-eu-west-1']);
    expect(dashboard(central.platform)).toEqual(['PlatformStack-eu-central-1']);
    expect(west.edge!.stackName).toBe('PlatformStack-edge-eu-west-1');
    expect(central.edge!.stackName).toBe('PlatformStack-edge-eu-central-1');
    for (const { edge } of [west, central]) expect(edge!.region).toBe('us-east-1');
    expect(edgeFunctionNames(west.edge!)).toEqual(['PlatformStack-eu-west-1-data-upload-relay']);
    expect(edgeFunctionNames(central.edge!)).toEqual(['PlatformStack-eu-central-1-data-upload-relay']);
    // In us-east-1 the relay sits in the stack itself, under a name no other region's uses.
    const east = synth('us-east-1');
    expect(east.edge).toBeUndefined();
    expect(dashboard(east.platform)).toEqual(['PlatformStack-us-east-1']);
    expect(edgeFunctionNames(east.platform)).toEqual(['PlatformStack-us-east-1-data-upload-relay']);
  }, SYNTH_TIMEOUT);
});

describe("the Lambda@Edge replicas' logs", () => {
  it('have their us-east-1 group made with retention, in the stack that holds the function', () => {
    for (const region of ['us-east-1', 'eu-west-1']) {
      const { platform, edge } = synth(region);
      const holder = edge ?? platform;
      const groups = resources(holder, 'AWS::Logs::LogGroup').map(([, r]) => r.Properties);
      expect(groups, region).toContainEqual(expect.objectContaining({ LogGroupName: `/aws/lambda/us-east-1.PlatformStack-${region}-data-upload-relay`, RetentionInDays: 90 }));
    }
  }, SYNTH_TIMEOUT);
});
