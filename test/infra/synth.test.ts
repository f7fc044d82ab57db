/**
 * What `npm run synth` does, offline, in parts that together cost a fraction of a full `cdk synth`
 * (which bundles about 50 functions one esbuild process after another: 83 s on a quiet 2-vCPU machine,
 * 140 s and more inside the suite):
 * - the CDK CLI runs the app (cdk.json, bin/app.ts) and writes a template holding every function
 *   (`cdk ls -o`: the same synthesis, with bundling left to the commands that deploy), the APIs' in
 *   nested templates beside it;
 * - CDK's own bundling, as the stack calls it (bundledFunctionProps), turns a route's entry into an ESM
 *   bundle with the require banner and a source map, the very code the load test's esbuild run makes;
 * - test/infra/lambda-bundles.test.ts bundles every function's entry in one esbuild run with those
 *   settings and loads each bundle alone, as Lambda does.
 */
import { App, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { NodejsFunction } from 'aws-cdk-lib/aws-lambda-nodejs';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { ROUTES, SOCKET_ROUTES } from '../../lambdas/http/routes.js';
import { bundledFunctionProps, CONSUMER_TAG, lambdaEntry, PROJECT_ROOT } from '../../lib/function-defaults.js';
import { buildBundles, runAlone } from '../helpers/lambda-bundles.js';
import { STREAM_ROUTE_TAG } from '../../lib/ai-edge.js';
import { flattenTemplate, routeFunctions, taggedFunctions } from './helpers.js';

const noCredentialEvent = {
  version: '2.0',
  routeKey: '$default',
  rawPath: '/v1/chat/completions',
  rawQueryString: '',
  headers: {},
  requestContext: { http: { method: 'POST', path: '/v1/chat/completions', sourceIp: '203.0.113.7' }, requestId: 'request', timeEpoch: Date.now() },
  isBase64Encoded: false,
};

const BANNER = /^import \{ createRequire \} from 'node:module'; const require = createRequire\(import\.meta\.url\);/;

function withTempDir<T>(prefix: string, use: (dir: string) => Promise<T>): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return use(dir).finally(() => rmSync(dir, { recursive: true, force: true }));
}

describe('npm run synth, offline', () => {
  it('the CDK CLI runs the app and writes a template with one function per route, the queue consumers and the streamed routes\' streaming functions', async () => {
    await withTempDir('cdk-ls-', async (out) => {
      const { stdout } = await promisify(execFile)('npx', ['cdk', 'ls', '--no-notices', '-o', out], { cwd: PROJECT_ROOT, timeout: 120_000 });
      expect(stdout.trim()).toBe('PlatformStack');
      // The root template with its nested stacks' templates (files named by each nested stack resource), theirs in turn (the console's route stacks).
      const read = (file: string) => JSON.parse(readFileSync(join(out, file), 'utf8'));
      const flat = (json: ReturnType<typeof read>): ReturnType<typeof read> => flattenTemplate(json, (id) => flat(read(json.Resources[id].Metadata['aws:asset:path'])));
      const template = Template.fromJSON(flat(read('PlatformStack.template.json')));
      expect([...routeFunctions(template).keys()].sort()).toEqual([...ROUTES, ...SOCKET_ROUTES].map((r) => r.id).sort());
      expect([...taggedFunctions(template, CONSUMER_TAG).keys()].sort()).toEqual(['blob-arrivals', 'collections-sweep', 'jobs', 'knowledge-items', 'knowledge-jobs', 'knowledge-jobs-sweep', 'outbox-sweep', 'platform-events-sweep', 'streams', 'upload-checks', 'uploads-sweep', 'webhooks']);
      expect([...taggedFunctions(template, STREAM_ROUTE_TAG).keys()].sort()).toEqual(['ai.chat.completions', 'ai.collections.chat', 'ai.responses.create']);
    });
  }, 150_000);

  it("CDK's bundling, with the stack's settings, makes a route's entry an ESM bundle with the require banner and a source map", async () => {
    await withTempDir('cdk-bundle-', async (outdir) => {
      const app = new App({ outdir });
      const stack = new Stack(app, 'BundleCheck');
      const entry = lambdaEntry('http/handlers/ai/chat-completions', 'chat');
      new NodejsFunction(stack, 'Chat', bundledFunctionProps(entry));
      app.synth();
      const [fn] = Object.values(Template.fromStack(stack).findResources('AWS::Lambda::Function')) as { Properties: { Code: { S3Key: string } } }[];
      const asset = join(outdir, `asset.${fn.Properties.Code.S3Key.replace(/\.zip$/, '')}`);
      expect(readdirSync(asset).sort()).toEqual(['index.mjs', 'index.mjs.map']);
      // The map names our sources (a stack trace then shows lambdas/...ts and a line) without their text,
      // which no trace reads and which made each map about 4 MB.
      const map = JSON.parse(readFileSync(join(asset, 'index.mjs.map'), 'utf8')) as { sources: string[]; sourcesContent?: unknown; mappings: string };
      expect(map.sources.some((s) => s.endsWith('lambdas/http/handlers/ai/chat-completions.ts'))).toBe(true);
      expect(map.sourcesContent).toBeUndefined();
      expect(map.mappings.length).toBeGreaterThan(0);
      const bundle = readFileSync(join(asset, 'index.mjs'), 'utf8');
      expect(bundle).toMatch(BANNER);
      // The native and local-only modules stay out entirely (test/infra/lambda-bundles.test.ts checks every function).
      expect(bundle).not.toContain('better-sqlite3');
      // The load test's bundles are CDK's: the same esbuild settings give the same code.
      const [ours] = (await buildBundles([{ key: 'chat', entry }], join(outdir, 'ours'))).values();
      const code = (text: string) => text.replace(/\/\/# sourceMappingURL=.*\s*$/, '');
      expect(code(readFileSync(ours.file, 'utf8'))).toBe(code(bundle));
      // And it loads alone, as Lambda loads it, and answers as the route does.
      const outcome = await runAlone(join(asset, 'index.mjs'), { environment: { ENGINE: 'aws' }, events: [noCredentialEvent] });
      expect(outcome.loadError).toBeUndefined();
      expect(outcome.results).toMatchObject([{ value: { statusCode: 401 } }]);
    });
  }, 120_000);
});
