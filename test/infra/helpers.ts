import { expect } from 'vitest';
import { App, NestedStack, Stack, Validations, type CfnElement } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { VALIDATION_REPORT_FILE } from 'aws-cdk-lib/cx-api';
import { AwsSolutionsChecks } from 'cdk-nag';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ENV } from '../../lambdas/shared/settings.js';
import type { Grant } from '../../lambdas/http/routes.js';
import { PlatformStack } from '../../lib/platform-stack.js';
import { ROUTE_TAG } from '../../lib/route-function.js';
import { CONSOLE_API, CONSOLE_ORIGIN_VERIFY_SETTING, CONSOLE_URL_SETTING } from '../../lib/console.js';
import { CONSUMER_TAG, PROJECT_ROOT, SOURCE_MAP_ENVIRONMENT } from '../../lib/function-defaults.js';

/** Skip esbuild in template tests: asset hashes are placeholders, synthesis takes a second. */
export const NO_BUNDLING = { 'aws:cdk:bundling-stacks': [] as string[] };

/** cdk.json's context (the feature flags): what the CDK CLI gives the app, so the tests see the templates it deploys. */
export const CDK_JSON_CONTEXT = (JSON.parse(readFileSync(join(PROJECT_ROOT, 'cdk.json'), 'utf8')) as { context?: Record<string, unknown> }).context ?? {};

/** The region the template tests synthesize the stack for. */
export const TEST_REGION = 'us-east-1';

export function synthStack(opts: { nag?: boolean } = {}) {
  const app = new App({ context: { ...CDK_JSON_CONTEXT, ...NO_BUNDLING } });
  // A region, as bin/app.ts names one (the Data distribution's Lambda@Edge needs it): us-east-1, where the relay sits in the stack itself.
  const stack = new PlatformStack(app, 'PlatformStack', { env: { region: TEST_REGION } });
  if (opts.nag) Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
  return { app, stack };
}

type TemplateJson = { Resources: Record<string, any>; Outputs?: Record<string, any>; Conditions?: Record<string, any>; [section: string]: unknown };

/** Every template of the stack, the root's first: each nested stack's under its construct path. */
export function stackTemplates(stack: Stack): { path: string; template: Template }[] {
  const nested = stack.node.findAll().filter((c): c is NestedStack => NestedStack.isNestedStack(c));
  return [{ path: stack.node.path, template: Template.fromStack(stack) }, ...nested.map((n) => ({ path: n.node.path, template: Template.fromStack(n) }))];
}

/**
 * The stack as one template, for tests that look across its nested stacks (an API's functions and the
 * table they are granted, the parent's outputs of a nested API): each nested stack's resources moved
 * into the parent under `<nested stack resource id>/<own id>` (each template has its own ids: every
 * API has an `Api...`), its parameters replaced by what the parent passes, the parent's references to
 * its outputs by their values. `flatLogicalId` names a construct's resource in it.
 */
export function flatTemplate(stack: Stack): Template {
  return Template.fromJSON(flatJson(stack));
}

function flatJson(stack: Stack): TemplateJson {
  const nestedById = new Map<string, TemplateJson>();
  for (const n of stack.node.findAll()) {
    if (NestedStack.isNestedStack(n) && n.nestedStackParent === stack) nestedById.set(stack.getLogicalId(n.nestedStackResource as CfnElement), flatJson(n));
  }
  return flattenTemplate(Template.fromStack(stack).toJSON() as TemplateJson, (id) => nestedById.get(id));
}

/** A resource's logical id in `flatTemplate`: its own template's, behind those of the nested stacks that hold it. */
export function flatLogicalId(element: CfnElement): string {
  const stack = Stack.of(element);
  const own = stack.getLogicalId(element);
  return stack.nestedStackResource ? `${flatLogicalId(stack.nestedStackResource as CfnElement)}/${own}` : own;
}

/** `flatTemplate` over template JSON: `nestedOf` gives the (already flat) template of a nested stack resource. */
export function flattenTemplate(root: TemplateJson, nestedOf: (logicalId: string) => TemplateJson | undefined): TemplateJson {
  const out: TemplateJson = structuredClone(root);
  const outputs = new Map<string, Record<string, any>>();
  for (const [id, resource] of Object.entries(root.Resources)) {
    if (resource.Type !== 'AWS::CloudFormation::Stack') continue;
    const nested = nestedOf(id);
    if (!nested) throw new Error(`no template for nested stack ${id}`);
    const parameters = (resource.Properties?.Parameters ?? {}) as Record<string, unknown>;
    const own = new Set([...Object.keys(nested.Resources), ...Object.keys(nested.Conditions ?? {})]);
    const renamed = (name: string) => (own.has(name) ? `${id}/${name}` : name);
    const rewrite = (v: any): unknown => {
      if (typeof v?.Ref === 'string') return v.Ref in parameters ? parameters[v.Ref] : { Ref: renamed(v.Ref) };
      const att = v?.['Fn::GetAtt'];
      if (Array.isArray(att) && typeof att[0] === 'string') return { 'Fn::GetAtt': [renamed(att[0]), ...att.slice(1)] };
      const fnIf = v?.['Fn::If'];
      if (Array.isArray(fnIf)) return { 'Fn::If': [renamed(fnIf[0]), ...fnIf.slice(1).map((x: unknown) => replaceDeep(x, rewrite))] };
      if (typeof v?.Condition === 'string' && Object.keys(v).length === 1) return { Condition: renamed(v.Condition) };
      return undefined;
    };
    const substituted = replaceDeep(nested, rewrite) as TemplateJson;
    delete out.Resources[id];
    for (const [key, value] of Object.entries(substituted.Resources)) {
      const dependsOn = value.DependsOn === undefined ? undefined : ([] as string[]).concat(value.DependsOn).map(renamed);
      const condition = value.Condition === undefined ? undefined : renamed(value.Condition);
      out.Resources[renamed(key)] = { ...value, ...(dependsOn ? { DependsOn: dependsOn } : {}), ...(condition ? { Condition: condition } : {}) };
    }
    for (const [key, value] of Object.entries(substituted.Conditions ?? {})) out.Conditions = { ...out.Conditions, [renamed(key)]: value };
    outputs.set(id, Object.fromEntries(Object.entries(substituted.Outputs ?? {}).map(([k, o]) => [k, o.Value])));
  }
  return replaceDeep(out, (v) => {
    const att = v?.['Fn::GetAtt'];
    if (!Array.isArray(att) || !outputs.has(att[0]) || !String(att[1]).startsWith('Outputs.')) return undefined;
    return outputs.get(att[0])![String(att[1]).slice('Outputs.'.length)];
  }) as TemplateJson;
}

/** `value` with every part `replace` answers for (anything but undefined) replaced, depth first from the top. */
function replaceDeep(value: unknown, replace: (v: any) => unknown): unknown {
  if (value === null || typeof value !== 'object') return value;
  const replaced = replace(value);
  if (replaced !== undefined) return replaced;
  if (Array.isArray(value)) return value.map((v) => replaceDeep(v, replace));
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, replaceDeep(v, replace)]));
}

export interface Violation {
  ruleName: string;
  severity: string;
  violatingConstructs?: { constructPath: string }[];
}

/**
 * cdk-nag 3 is a policy validation plugin: it reports into the cloud assembly's validation report
 * (it no longer adds annotations). Synthesis throws, with the report, on unacknowledged errors;
 * warnings only land in the report, so read that too.
 */
export function nagFindings(app: App): Violation[] {
  const assembly = app.synth();
  const report = JSON.parse(readFileSync(join(assembly.directory, VALIDATION_REPORT_FILE), 'utf8')) as {
    pluginReports: { violations?: Violation[] }[];
  };
  return report.pluginReports.flatMap((r) => r.violations ?? []).filter((v) => /^AwsSolutions-/.test(v.ruleName));
}

type Resource = { Type: string; Properties: Record<string, any> };
export type RouteFunctionResource = { logicalId: string; props: Record<string, any> };

/** Lambda functions the route table made, by route id (tagged), leaving out any CDK helper function. */
export function routeFunctions(template: Template): Map<string, RouteFunctionResource> {
  return taggedFunctions(template, ROUTE_TAG);
}

/** Lambda functions carrying `tag`, by the tag's value (ROUTE_TAG: route ids; CONSUMER_TAG: consumer names). */
/** The template's logical id of a construct's main resource (a table, a queue, a distribution...). */
export const logicalIdIn = (_stack: Stack, construct: { node: { defaultChild?: unknown } }) => flatLogicalId(construct.node.defaultChild as CfnElement);

/** The queue or schedule consumer tagged `name` (lib/function-defaults.ts), or a failed test naming it. */
export function consumerFunction(template: Template, name: string): RouteFunctionResource {
  const fn = taggedFunctions(template, CONSUMER_TAG).get(name);
  if (!fn) throw new Error(`no function tagged ${CONSUMER_TAG}=${name}`);
  return fn;
}

export function taggedFunctions(template: Template, tagKey: string): Map<string, RouteFunctionResource> {
  const out = new Map<string, RouteFunctionResource>();
  for (const [logicalId, r] of Object.entries(template.findResources('AWS::Lambda::Function') as Record<string, Resource>)) {
    const tag = (r.Properties.Tags ?? []).find((t: { Key: string }) => t.Key === tagKey);
    if (!tag) continue;
    if (out.has(tag.Value)) throw new Error(`two functions tagged ${tagKey}=${tag.Value}`);
    out.set(tag.Value, { logicalId, props: r.Properties });
  }
  return out;
}

export interface AllowStatement {
  actions: string[];
  /** The statement's Resource, JSON-encoded (it holds CloudFormation references). */
  resources: string;
  /** The statement's Condition, when it has one. */
  condition?: Record<string, Record<string, unknown>>;
}

/** Every IAM action allowed to a function's role, with the resources of each statement. */
export function allowedStatements(template: Template, fn: RouteFunctionResource): AllowStatement[] {
  const roleId = fn.props.Role['Fn::GetAtt'][0] as string;
  const role = template.findResources('AWS::IAM::Role')[roleId] as Resource;
  expect(role.Properties.ManagedPolicyArns ?? []).toEqual([]);
  const policies = Object.values(template.findResources('AWS::IAM::Policy') as Record<string, Resource>).filter((p) =>
    p.Properties.Roles.some((r: { Ref?: string }) => r.Ref === roleId),
  );
  return policies.flatMap((p) =>
    p.Properties.PolicyDocument.Statement.filter((s: { Effect: string }) => s.Effect === 'Allow').map(
      (s: { Action: string | string[]; Resource: unknown; Condition?: Record<string, Record<string, unknown>> }) => ({
        actions: ([] as string[]).concat(s.Action),
        resources: JSON.stringify(s.Resource),
        ...(s.Condition ? { condition: s.Condition } : {}),
      }),
    ),
  );
}

export const actionsOf = (statements: { actions: string[] }[]) => statements.flatMap((s) => s.actions);

/** What every function's environment holds beside its settings: Node's own options (source maps on). */
export const RUNTIME_ENV_NAMES = Object.keys(SOURCE_MAP_ENVIRONMENT);

/** The environment variable names a function with these grants (of a route of `api`) must get, and no others. */
export function expectedEnvNames(grants: readonly Grant[], api?: string): string[] {
  const g = new Set(grants);
  // Every function verifies tokens, so every one gets the signing key ids.
  const names: string[] = [ENV.engine, ENV.signingKeyIds, ...RUNTIME_ENV_NAMES];
  // The console API's functions know the console's own origin (lib/console.ts).
  // …and the value of CloudFront's origin header that every console API request must carry.
  if (api === CONSOLE_API) names.push(CONSOLE_URL_SETTING, CONSOLE_ORIGIN_VERIFY_SETTING);
  if (g.has('table:read') || g.has('table:write')) names.push(ENV.tableName);
  if (g.has('blobs:read') || g.has('blobs:write')) names.push(ENV.bucketName);
  if (g.has('queue:send')) names.push(ENV.queueUrls);
  if (g.has('connections:post')) names.push(ENV.connectionsEndpoint);
  if (g.has('connections:table')) names.push(ENV.connectionsTable);
  if (g.has('secret:read')) names.push(ENV.serverSecretArn);
  if (g.has('vectors:read') || g.has('vectors:write')) names.push(ENV.vectorBucketName);
  if (g.has('ffmpeg:run')) names.push(ENV.ffmpegPath);
  return names.sort();
}

/** Logical id of the function an API Gateway integration invokes. */
export function integratedFunction(template: Template, route: Resource): string {
  const integrationId = route.Properties.Target['Fn::Join'][1][1].Ref as string;
  const integration = template.findResources('AWS::ApiGatewayV2::Integration')[integrationId] as Resource;
  const uri = JSON.stringify(integration.Properties.IntegrationUri);
  const match = /"Fn::GetAtt":\["([^"]+)","Arn"\]/.exec(uri);
  if (!match) throw new Error(`integration ${integrationId} does not invoke a function of this stack: ${uri}`);
  return match[1];
}

/** `evt#*` as IAM's StringLike reads it: a test of a partition key value (`*` matches anything). */
export const leadingKeyPattern = (pattern: string) => new RegExp(`^${pattern.split('*').map((p) => p.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('.*')}$`);
