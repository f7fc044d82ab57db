/**
 * What `npm run synth` does, offline, in three parts that together cost a fraction of a full `cdk synth`
 * (which bundles about 50 functions one esbuild process after another: 83 s on a quiet 2-vCPU machine,
 * 140 s and more inside the suite):
 * - the CDK CLI runs the app (cdk.json, bin/app.ts) and writes a template holding every function
 *   (`cdk ls -o`: the same synthesis, with bundling left to the commands that deploy);
 * - CDK's own bundling, as the stack calls it (bundledFunctionProps), turns a route's entry into an ESM
 *   bundle with the require banner and a source map;
 * - every module that exports a Lambda handler bundles with those same esbuild options (but minifying and
 *   source maps), all in one esbuild run: a missing import or an unbundlable dependency fails here, not
 *   at deploy.
 */
import { App, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { NodejsFunction, OutputFormat } from 'aws-cdk-lib/aws-lambda-nodejs';
import { build } from 'esbuild';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { ROUTES, SOCKET_ROUTES } from '../../lambdas/http/routes.js';
import { bundledFunctionProps, CONSUMER_TAG, lambdaEntry, PROJECT_ROOT } from '../../lib/function-defaults.js';
import { STREAM_ROUTE_TAG } from '../../lib/ai-edge.js';
import { routeFunctions, taggedFunctions } from './helpers.js';

const BANNER = /^import \{ createRequire \} from 'node:module'; const require = createRequire\(import\.meta\.url\);/;

function withTempDir<T>(prefix: string, use: (dir: string) => Promise<T>): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return use(dir).finally(() => rmSync(dir, { recursive: true, force: true }));
}

/** Every module under lambdas/ that exports `handler`: each one a function's entry. */
function handlerModules(): string[] {
  const found: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith('.ts') && /^export (const|async function|function) handler\b/m.test(readFileSync(path, 'utf8'))) found.push(path);
    }
  };
  walk(join(PROJECT_ROOT, 'lambdas'));
  return found.sort();
}

describe('npm run synth, offline', () => {
  it('the CDK CLI runs the app and writes a template with one function per route, the queue consumers and the streaming chat function', async () => {
    await withTempDir('cdk-ls-', async (out) => {
      const { stdout } = await promisify(execFile)('npx', ['cdk', 'ls', '--no-notices', '-o', out], { cwd: PROJECT_ROOT, timeout: 120_000 });
      expect(stdout.trim()).toBe('PlatformStack');
      const template = Template.fromJSON(JSON.parse(readFileSync(join(out, 'PlatformStack.template.json'), 'utf8')));
      expect([...routeFunctions(template).keys()].sort()).toEqual([...ROUTES, ...SOCKET_ROUTES].map((r) => r.id).sort());
      expect([...taggedFunctions(template, CONSUMER_TAG).keys()].sort()).toEqual(['outbox-sweep', 'platform-events-sweep', 'streams', 'webhooks']);
      expect([...taggedFunctions(template, STREAM_ROUTE_TAG).keys()]).toEqual(['ai.chat.completions']);
    });
  }, 150_000);

  it("CDK's bundling, with the stack's settings, makes a route's entry an ESM bundle with the require banner and a source map", async () => {
    await withTempDir('cdk-bundle-', async (outdir) => {
      const app = new App({ outdir });
      const stack = new Stack(app, 'BundleCheck');
      new NodejsFunction(stack, 'Chat', bundledFunctionProps(lambdaEntry('http/handlers/ai/chat-completions', 'chat')));
      app.synth();
      const [fn] = Object.values(Template.fromStack(stack).findResources('AWS::Lambda::Function')) as { Properties: { Code: { S3Key: string } } }[];
      const asset = join(outdir, `asset.${fn.Properties.Code.S3Key.replace(/\.zip$/, '')}`);
      expect(readdirSync(asset).sort()).toEqual(['index.mjs', 'index.mjs.map']);
      const bundle = readFileSync(join(asset, 'index.mjs'), 'utf8');
      expect(bundle).toMatch(BANNER);
      // The native and local-only modules stay out; the AWS SDK is in.
      expect(bundle).toMatch(/from"better-sqlite3"|from "better-sqlite3"|import\("better-sqlite3"\)/);
      expect(bundle).not.toContain('node_modules/better-sqlite3/lib');
    });
  }, 120_000);

  it('every module exporting a handler bundles with those esbuild settings (format, target, main fields, banner, externals)', async () => {
    const modules = handlerModules();
    // Every route's and consumer's entry is among them (lambdaEntry resolves each at synthesis).
    for (const route of [...ROUTES, ...SOCKET_ROUTES]) expect(modules).toContain(lambdaEntry(route.handler, route.id));
    for (const consumer of ['streams', 'webhooks', 'outbox-sweep', 'platform-events-sweep']) expect(modules).toContain(lambdaEntry(`consumers/${consumer}`, consumer));
    const { bundling, runtime } = bundledFunctionProps(modules[0]);
    expect(bundling?.format).toBe(OutputFormat.ESM);
    expect(runtime?.name).toMatch(/^nodejs\d+\.x$/);
    await withTempDir('bundles-', async (outdir) => {
      const result = await build({
        entryPoints: modules,
        outdir,
        outbase: join(PROJECT_ROOT, 'lambdas'),
        outExtension: { '.js': '.mjs' },
        bundle: true,
        platform: 'node',
        format: 'esm',
        target: bundling!.target,
        mainFields: bundling!.mainFields,
        banner: { js: bundling!.banner! },
        // Minifying and mapping do not change what resolves or bundles; CDK's own run above does both.
        external: bundling!.externalModules,
        logLevel: 'silent',
      });
      expect(result.errors).toEqual([]);
      for (const module of modules) {
        const out = join(outdir, relative(join(PROJECT_ROOT, 'lambdas'), module).replace(/\.ts$/, '.mjs'));
        expect(existsSync(out), module).toBe(true);
        expect(readFileSync(out, 'utf8'), module).toMatch(BANNER);
      }
    });
  }, 120_000);
});
