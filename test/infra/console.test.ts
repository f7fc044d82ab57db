/**
 * The console on AWS (lib/console.ts, docs/decisions/console-aws.md): the built files in a private
 * bucket behind CloudFront with origin access control, pages answered by index.html without touching
 * the console API's answers, the console's security headers, and the console API as one function per
 * route table row behind the same distribution, each knowing the console's URL.
 */
import { App, Stack, type CfnElement } from 'aws-cdk-lib';
import { Bucket } from 'aws-cdk-lib/aws-s3';
import { BucketDeployment } from 'aws-cdk-lib/aws-s3-deployment';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Match, type Template } from 'aws-cdk-lib/assertions';
import { CachePolicy, OriginRequestPolicy } from 'aws-cdk-lib/aws-cloudfront';
import { runInNewContext } from 'node:vm';
import { beforeAll, describe, expect, it } from 'vitest';
import { CONSOLE_ORIGIN_HEADER, CONSOLE_SECURITY_HEADERS } from '../../lambdas/shared/console-headers.js';
import { countsCalls } from '../../lambdas/http/routes.js';
import { CONSOLE_CONTENT_SECURITY_POLICY, CONSOLE_DIST, CONSOLE_ORIGIN_IDS, CONSOLE_ORIGIN_VERIFY_SETTING, CONSOLE_URL_SETTING, consoleFiles, consoleRouteStack, consoleRoutes } from '../../lib/console.js';
import { CONSOLE_API_PATH_PATTERN, spaFallbackFunctionCode, spaFallbackHandlerSource } from '../../lib/console-edge-function.js';
import type { PlatformStack } from '../../lib/platform-stack.js';
import { actionsOf, allowedStatements, expectedEnvNames, flatLogicalId, flatTemplate, integratedFunction, logicalIdIn, routeFunctions, stackTemplates, synthStack } from './helpers.js';

type Resource = { Type: string; Properties: Record<string, any>; DependsOn?: string | string[] };

let stack: PlatformStack;
let template: Template;
let distribution: Record<string, any>;
let distributionId: string;

beforeAll(() => {
  ({ stack } = synthStack());
  template = flatTemplate(stack);
  distributionId = logicalIdIn(stack, stack.console.distribution);
  distribution = (template.findResources('AWS::CloudFront::Distribution')[distributionId] as Resource).Properties.DistributionConfig;
});

const ROUTES = consoleRoutes();
const resources = () => template.toJSON().Resources as Record<string, Resource>;
const consoleUrl = () => ({ 'Fn::Join': ['', ['https://', { 'Fn::GetAtt': [distributionId, 'DomainName'] }]] });
/** The origin secret's value as CloudFormation resolves it at deployment: the template holds only the secret's ARN (a dynamic reference). */
const originVerify = () => ({ 'Fn::Join': ['', ['{{resolve:secretsmanager:', { Ref: logicalIdIn(stack, stack.console.originSecret) }, ':SecretString:::}}']] });

describe('the files', () => {
  it('sit in a private bucket: all public access blocked, SSE, TLS only, access logs to the log bucket under console/', () => {
    const bucketId = logicalIdIn(stack, stack.console.bucket);
    const bucket = resources()[bucketId];
    expect(bucket.Properties.PublicAccessBlockConfiguration).toEqual({ BlockPublicAcls: true, BlockPublicPolicy: true, IgnorePublicAcls: true, RestrictPublicBuckets: true });
    expect(bucket.Properties.BucketEncryption.ServerSideEncryptionConfiguration).toEqual([{ ServerSideEncryptionByDefault: { SSEAlgorithm: 'AES256' } }]);
    expect(bucket.Properties.OwnershipControls).toEqual({ Rules: [{ ObjectOwnership: 'BucketOwnerEnforced' }] });
    expect(bucket.Properties.LoggingConfiguration).toEqual({ DestinationBucketName: { Ref: logicalIdIn(stack, stack.storage.accessLogs) }, LogFilePrefix: 'console/' });
    template.hasResourceProperties('AWS::S3::BucketPolicy', {
      Bucket: { Ref: bucketId },
      PolicyDocument: { Statement: Match.arrayWith([Match.objectLike({ Effect: 'Deny', Principal: { AWS: '*' }, Condition: { Bool: { 'aws:SecureTransport': 'false' } } })]) },
    });
  });

  it('are read by CloudFront through origin access control (no legacy OAI), for this distribution only, read only', () => {
    template.resourceCountIs('AWS::CloudFront::CloudFrontOriginAccessIdentity', 0);
    const oacs = template.findResources('AWS::CloudFront::OriginAccessControl') as Record<string, Resource>;
    expect(Object.values(oacs).map((o) => o.Properties.OriginAccessControlConfig)).toEqual([
      expect.objectContaining({ OriginAccessControlOriginType: 's3', SigningBehavior: 'always', SigningProtocol: 'sigv4' }),
    ]);
    const files = distribution.Origins.find((o: { Id: string }) => o.Id === CONSOLE_ORIGIN_IDS.files);
    expect(files.OriginAccessControlId).toEqual({ 'Fn::GetAtt': [Object.keys(oacs)[0], 'Id'] });
    expect(files.S3OriginConfig).toEqual({ OriginAccessIdentity: '' });
    const policy = Object.values(template.findResources('AWS::S3::BucketPolicy') as Record<string, Resource>).find((p) => p.Properties.Bucket.Ref === logicalIdIn(stack, stack.console.bucket))!;
    const allows = policy.Properties.PolicyDocument.Statement.filter((s: { Effect: string }) => s.Effect === 'Allow');
    expect(allows).toEqual([
      expect.objectContaining({
        Principal: { Service: 'cloudfront.amazonaws.com' },
        Action: 's3:GetObject',
        Condition: { StringEquals: { 'AWS:SourceArn': expect.objectContaining({ 'Fn::Join': expect.arrayContaining([expect.arrayContaining([{ Ref: distributionId }])]) }) } },
      }),
    ]);
  });

  it('are deployed from the built console by CDK, replacing all (prune), no-cache (no invalidation needed), under our own role and log group', () => {
    const deployments = Object.values(template.findResources('Custom::CDKBucketDeployment')) as Resource[];
    expect(deployments).toHaveLength(1);
    const d = deployments[0].Properties;
    expect(d.DestinationBucketName).toEqual({ Ref: logicalIdIn(stack, stack.console.bucket) });
    expect(d.Prune).toBe(true);
    expect(d.SystemMetadata).toEqual({ 'cache-control': 'no-cache' });
    // CloudFront keeps a no-cache file at most its policy's minimum TTL: no invalidation, so no CloudFront IAM.
    expect(d.DistributionId).toBeUndefined();
    expect(CachePolicy.CACHING_OPTIMIZED.cachePolicyId).toBe('658327ea-f89d-4fab-a63d-7e88639e58f6');
    // The handler: our role (no managed policy) and a log group with retention.
    const handlerId = d.ServiceToken['Fn::GetAtt'][0] as string;
    const handler = resources()[handlerId];
    const role = resources()[handler.Properties.Role['Fn::GetAtt'][0]];
    expect(role.Properties.ManagedPolicyArns ?? []).toEqual([]);
    const policies = Object.values(template.findResources('AWS::IAM::Policy') as Record<string, Resource>).filter((p) => p.Properties.Roles.some((r: { Ref?: string }) => r.Ref === handler.Properties.Role['Fn::GetAtt'][0]));
    const actions = policies.flatMap((p) => p.Properties.PolicyDocument.Statement.flatMap((st: { Action: string | string[] }) => ([] as string[]).concat(st.Action)));
    expect(actions.filter((a) => !/^(s3|logs):/.test(a))).toEqual([]);
    expect(resources()[handler.Properties.LoggingConfig.LogGroup.Ref].Properties.RetentionInDays).toBeGreaterThan(0);
  });
});

describe('the files at synthesis', () => {
  it('are the console built by npm run build:console, without its dot files, in the deployment asset', () => {
    const outdir = mkdtempSync(join(tmpdir(), 'console-files-'));
    try {
      // Bundling on for this one stack only: what `cdk synth` and `cdk deploy` do.
      const app = new App({ outdir, context: { 'aws:cdk:bundling-stacks': ['ConsoleFilesCheck'] } });
      const check = new Stack(app, 'ConsoleFilesCheck');
      new BucketDeployment(check, 'Files', { sources: [consoleFiles()], destinationBucket: new Bucket(check, 'Bucket') });
      app.synth();
      const assets = readdirSync(outdir).filter((f) => f.startsWith('asset.') && existsSync(join(outdir, f, 'index.html')));
      expect(assets).toHaveLength(1);
      const files = readdirSync(join(outdir, assets[0]), { recursive: true }).map(String);
      expect(files).toEqual(expect.arrayContaining(['index.html', 'assets']));
      expect(files.filter((f) => /\.js$/.test(f)).length).toBeGreaterThan(0);
      expect(files.filter((f) => f.split('/').some((part) => part.startsWith('.')))).toEqual([]);
      expect(readFileSync(join(outdir, assets[0], 'index.html'), 'utf8')).toBe(readFileSync(join(CONSOLE_DIST, 'index.html'), 'utf8'));
    } finally {
      rmSync(outdir, { recursive: true, force: true });
    }
  }, 120_000);
});

describe('the distribution', () => {
  it('answers / with index.html and has no distribution-wide error responses (they would turn the API\'s 403 and 404 into a page)', () => {
    expect(distribution.DefaultRootObject).toBe('index.html');
    expect(distribution.CustomErrorResponses).toBeUndefined();
  });

  it('serves the files by default: GET and HEAD, cached, HTTPS, the page function on viewer requests', () => {
    const b = distribution.DefaultCacheBehavior;
    expect(b.TargetOriginId).toBe(CONSOLE_ORIGIN_IDS.files);
    expect(b.AllowedMethods).toEqual(['GET', 'HEAD']);
    expect(b.CachePolicyId).toBe(CachePolicy.CACHING_OPTIMIZED.cachePolicyId);
    expect(b.ViewerProtocolPolicy).toBe('redirect-to-https');
    expect(b.FunctionAssociations).toHaveLength(1);
    expect(b.FunctionAssociations[0].EventType).toBe('viewer-request');
    const fn = resources()[b.FunctionAssociations[0].FunctionARN['Fn::GetAtt'][0]];
    expect(fn.Properties.FunctionCode).toBe(spaFallbackFunctionCode());
    expect(fn.Properties.FunctionConfig.Runtime).toBe('cloudfront-js-2.0');
  });

  it(`sends ${CONSOLE_API_PATH_PATTERN} to the console API untouched: every method, no cache, every viewer header but Host, cookies and query, HTTPS only`, () => {
    expect(distribution.CacheBehaviors).toHaveLength(1);
    const b = distribution.CacheBehaviors[0];
    expect(b.PathPattern).toBe(CONSOLE_API_PATH_PATTERN);
    expect(b.TargetOriginId).toBe(CONSOLE_ORIGIN_IDS.api);
    expect([...b.AllowedMethods].sort()).toEqual(['DELETE', 'GET', 'HEAD', 'OPTIONS', 'PATCH', 'POST', 'PUT']);
    expect(b.CachePolicyId).toBe(CachePolicy.CACHING_DISABLED.cachePolicyId);
    expect(b.OriginRequestPolicyId).toBe(OriginRequestPolicy.ALL_VIEWER_EXCEPT_HOST_HEADER.originRequestPolicyId);
    expect(b.ViewerProtocolPolicy).toBe('https-only');
    expect(b.FunctionAssociations).toBeUndefined();
    const origin = distribution.Origins.find((o: { Id: string }) => o.Id === CONSOLE_ORIGIN_IDS.api);
    expect(JSON.stringify(origin.DomainName)).toContain(`{"Ref":"${logicalIdIn(stack, stack.console.api)}"},".execute-api.`);
    expect(origin.CustomOriginConfig).toMatchObject({ OriginProtocolPolicy: 'https-only', OriginSSLProtocols: ['TLSv1.2'] });
  });

  it('adds a secret header, generated at deployment, to every request it sends the console API, and to no other origin', () => {
    const origin = distribution.Origins.find((o: { Id: string }) => o.Id === CONSOLE_ORIGIN_IDS.api);
    expect(origin.OriginCustomHeaders).toEqual([{ HeaderName: CONSOLE_ORIGIN_HEADER, HeaderValue: originVerify() }]);
    for (const o of distribution.Origins) if (o.Id !== CONSOLE_ORIGIN_IDS.api) expect(o.OriginCustomHeaders, o.Id).toBeUndefined();
    const secret = resources()[logicalIdIn(stack, stack.console.originSecret)];
    expect(secret.Type).toBe('AWS::SecretsManager::Secret');
    expect(secret.Properties.GenerateSecretString).toMatchObject({ PasswordLength: 48, ExcludePunctuation: true });
    expect(secret.Properties.SecretString).toBeUndefined();
    // A viewer's own header of that name is overwritten by CloudFront; none of the names CloudFront refuses as custom headers.
    expect(CONSOLE_ORIGIN_HEADER).toMatch(/^x-(?!amz-|edge-)[a-z-]+$/);
  });

  it("sends the console's security headers on files and API answers alike", () => {
    const policyRef = distribution.DefaultCacheBehavior.ResponseHeadersPolicyId;
    expect(distribution.CacheBehaviors[0].ResponseHeadersPolicyId).toEqual(policyRef);
    const config = resources()[policyRef.Ref].Properties.ResponseHeadersPolicyConfig;
    const h = config.SecurityHeadersConfig;
    expect(h.ContentSecurityPolicy).toEqual({ ContentSecurityPolicy: CONSOLE_CONTENT_SECURITY_POLICY, Override: true });
    expect(CONSOLE_CONTENT_SECURITY_POLICY.split('; ')).toEqual(expect.arrayContaining(["default-src 'self'", "frame-ancestors 'none'"]));
    expect(h.StrictTransportSecurity).toEqual({ AccessControlMaxAgeSec: 63_072_000, IncludeSubdomains: true, Override: true });
    expect(h.FrameOptions).toEqual({ FrameOption: 'DENY', Override: true });
    expect(h.ContentTypeOptions).toEqual({ Override: true });
    expect(h.ReferrerPolicy).toEqual({ ReferrerPolicy: 'no-referrer', Override: true });
    // The very headers the console API's chain and the local server send (lambdas/http/middleware/respond.ts).
    expect(CONSOLE_SECURITY_HEADERS).toEqual({
      'content-security-policy': h.ContentSecurityPolicy.ContentSecurityPolicy,
      'x-frame-options': h.FrameOptions.FrameOption,
      'referrer-policy': h.ReferrerPolicy.ReferrerPolicy,
      'x-content-type-options': 'nosniff',
    });
  });
});

describe('the page function, as CloudFront runs it', () => {
  const handler = runInNewContext(`${spaFallbackHandlerSource()}; handler`, {}) as (event: unknown) => { uri: string; headers: unknown };
  const run = (uri: string) => handler({ request: { method: 'GET', uri, querystring: {}, headers: { cookie: { value: 'a=b' } }, cookies: {} } });

  it.each(['/', '/keys', '/invite', '/people/per_1', '/data/databases/db_1/collections/', '/index'])('answers the page %s with /index.html', (uri) => {
    expect(run(uri)).toMatchObject({ uri: '/index.html', headers: { cookie: { value: 'a=b' } } });
  });

  it.each(['/index.html', '/assets/index-Ab12.js', '/assets/index-Ab12.css', '/openapi/ai.json', '/favicon.svg', '/assets/missing.js'])('leaves the file %s alone', (uri) => {
    expect(run(uri).uri).toBe(uri);
  });
});

describe('the console API', () => {
  it('has console routes in the route table, all under /console/api/ but its $default', () => {
    expect(ROUTES.length).toBeGreaterThan(0);
    for (const r of ROUTES) if (r.path !== '$default') expect(r.path, r.id).toMatch(/^\/console\/api\//);
  });

  it('is an HTTP API with exactly the table\'s console routes, each invoking its own function, on an auto-deployed stage with access logs', () => {
    const apiId = logicalIdIn(stack, stack.console.api);
    template.hasResourceProperties('AWS::ApiGatewayV2::Api', { Name: 'PlatformStack-console', ProtocolType: 'HTTP' });
    const routes = Object.values(template.findResources('AWS::ApiGatewayV2::Route', { Properties: { ApiId: { Ref: apiId } } })) as Resource[];
    const key = (r: (typeof ROUTES)[number]) => (r.path === '$default' ? '$default' : `${r.method} ${r.path}`);
    expect(routes.map((r) => r.Properties.RouteKey).sort()).toEqual(ROUTES.map(key).sort());
    const fns = routeFunctions(template);
    for (const def of ROUTES) {
      const route = routes.find((r) => r.Properties.RouteKey === key(def))!;
      expect(integratedFunction(template, route), def.id).toBe(fns.get(def.id)!.logicalId);
    }
    template.hasResourceProperties('AWS::ApiGatewayV2::Stage', { ApiId: { Ref: apiId }, StageName: '$default', AutoDeploy: true, AccessLogSettings: Match.objectLike({ DestinationArn: Match.anyValue() }) });
  });

  it('gives each console function the console URL (the distribution\'s) and the origin header\'s value beside what its grants need, and nothing else', () => {
    const fns = routeFunctions(template);
    for (const r of ROUTES) {
      const env = fns.get(r.id)!.props.Environment.Variables as Record<string, unknown>;
      expect(Object.keys(env).sort(), r.id).toEqual(expectedEnvNames(r.grants, r.api));
      expect(env[CONSOLE_URL_SETTING], r.id).toEqual(consoleUrl());
      expect(env[CONSOLE_ORIGIN_VERIFY_SETTING], r.id).toEqual(originVerify());
    }
    // No other function of the stack gets them.
    for (const [id, fn] of fns) if (!id.startsWith('console.')) expect(fn.props.Environment.Variables[CONSOLE_URL_SETTING], id).toBeUndefined();
    for (const [id, fn] of fns) if (!id.startsWith('console.')) expect(fn.props.Environment.Variables[CONSOLE_ORIGIN_VERIFY_SETTING], id).toBeUndefined();
  });

  it('holds each console function in the nested stack its id picks, its role only what its grants say', () => {
    for (const r of ROUTES) {
      const fn = stack.console.functions[r.id];
      expect(fn.node.path, r.id).toContain(`/Console/Stack/Routes${consoleRouteStack(r.id)}/`);
      const statements = allowedStatements(template, routeFunctions(template).get(r.id)!);
      const actions = actionsOf(statements);
      const grants = new Set(r.grants);
      if (!grants.has('blobs:read') && !grants.has('blobs:write')) expect(actions.filter((a) => a.startsWith('s3:')), r.id).toEqual([]);
      if (!grants.has('queue:send')) expect(actions.filter((a) => a.startsWith('sqs:')), r.id).toEqual([]);
      if (!grants.has('secret:read')) expect(actions.filter((a) => a.startsWith('secretsmanager:')), r.id).toEqual([]);
      if (!grants.has('signing:sign')) expect(actions, r.id).not.toContain('kms:Sign');
      if (!grants.has('upstream-keys:read') && !grants.has('rerankers:call')) expect(actions.filter((a) => a.startsWith('bedrock:')), r.id).toEqual([]);
      if (!grants.has('vectors:read') && !grants.has('vectors:write')) expect(actions.filter((a) => a.startsWith('s3vectors:')), r.id).toEqual([]);
      if (!grants.has('connections:post')) expect(actions.filter((a) => a.startsWith('execute-api:')), r.id).toEqual([]);
      if (!grants.has('table:write')) {
        // Reading routes write only activity items (and rate windows where they count calls).
        const writes = statements.filter((s) => s.actions.some((a) => /^dynamodb:(Put|Update|Delete|BatchWrite)/.test(a)));
        expect(writes.every((s) => s.condition !== undefined), r.id).toBe(true);
        expect(writes.some((s) => s.actions.includes('dynamodb:UpdateItem')), r.id).toBe(countsCalls(r));
      }
    }
  });

  it('is alarmed on its 5xx rate, and each function on its errors', () => {
    const alarms = Object.values(template.findResources('AWS::CloudWatch::Alarm')) as Resource[];
    expect(alarms.filter((a) => a.Properties.AlarmName === 'PlatformStack-console-api-5xx')).toHaveLength(1);
    for (const r of ROUTES) {
      const ref = JSON.stringify({ Ref: flatLogicalId(stack.console.functions[r.id].node.defaultChild as CfnElement) });
      expect(alarms.filter((a) => JSON.stringify(a.Properties).includes(ref)), r.id).toHaveLength(1);
    }
  });
});

it('outputs ConsoleUrl: the distribution\'s https URL', () => {
  const outputs = template.findOutputs('ConsoleUrl');
  expect(outputs.ConsoleUrl.Value).toEqual(consoleUrl());
  expect(outputs.ConsoleUrl.Description).toMatch(/CONSOLE_URL/);
});

describe('templates', () => {
  /** A template's resources that depend on each other: Ref, GetAtt, Sub and DependsOn within it. */
  function cycleIn(resourcesOf: Record<string, Resource>): string[] | undefined {
    const ids = new Set(Object.keys(resourcesOf));
    const edges = new Map<string, Set<string>>();
    const collect = (v: unknown, out: Set<string>): void => {
      if (v === null || typeof v !== 'object') return;
      const o = v as Record<string, unknown>;
      if (typeof o.Ref === 'string' && ids.has(o.Ref)) out.add(o.Ref);
      const att = o['Fn::GetAtt'];
      if (Array.isArray(att) && ids.has(att[0])) out.add(att[0]);
      const sub = o['Fn::Sub'];
      if (typeof sub === 'string') for (const m of sub.matchAll(/\$\{([^}.!]+)/g)) if (ids.has(m[1])) out.add(m[1]);
      for (const x of Object.values(o)) collect(x, out);
    };
    for (const [id, r] of Object.entries(resourcesOf)) {
      const out = new Set<string>([...([] as string[]).concat(r.DependsOn ?? [])]);
      collect(r.Properties, out);
      edges.set(id, out);
    }
    const state = new Map<string, 'open' | 'done'>();
    const visit = (id: string, path: string[]): string[] | undefined => {
      if (state.get(id) === 'done') return undefined;
      if (state.get(id) === 'open') return [...path, id];
      state.set(id, 'open');
      for (const next of edges.get(id) ?? []) {
        const cycle = visit(next, [...path, id]);
        if (cycle) return cycle;
      }
      state.set(id, 'done');
      return undefined;
    };
    for (const id of ids) {
      const cycle = visit(id, []);
      if (cycle) return cycle;
    }
    return undefined;
  }

  it('have no dependency cycle: the functions know the distribution, which knows the API, which does not wait for its routes', () => {
    for (const { path, template: t } of stackTemplates(stack)) expect(cycleIn(t.toJSON().Resources), path).toBeUndefined();
    // The whole, as CloudFormation orders the nested stacks' resources among themselves.
    expect(cycleIn(resources())).toBeUndefined();
  });
});
