/**
 * The import graph of the project's own sources, and the rules it must keep (docs/architecture.md
 * draws them): layers, and no file-level cycles. A file's layer is the folder it lives in (the
 * settings file is a layer of its own); a rule lists what a layer may import, so an import that no
 * rule allows is a violation.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, posix } from 'node:path';

export interface Import {
  from: string;
  /** A project file (repo-relative, `.ts`) or a package name. */
  to: string;
  line: number;
}

/** Layer of a project file, or undefined for files no rule covers (tests). */
export function layerOf(file: string): string | undefined {
  const p = file.split('/');
  if (p[0] === 'lib' || p[0] === 'bin') return p[0];
  if (p[0] !== 'lambdas') return undefined;
  // Settings are read by every layer and import no project file: a leaf of their own.
  if (file === SETTINGS) return 'settings';
  // The AI providers that speak through an AWS SDK (Bedrock's, and its reranker) are a layer of their own, so `ai` stays SDK-free.
  if (p[1] === 'ai' && p[2] === 'providers' && (p[3] === 'bedrock' || file === 'lambdas/ai/providers/rerank/bedrock.ts')) return 'ai/providers/bedrock';
  // OpenAI's retrieval APIs map onto knowledge collections and the vector database, which `ai` may not read: a layer above them.
  if (p[1] === 'ai' && p[2] === 'openai-compat') return 'ai/openai-compat';
  if (p[1] === 'engine') {
    // The adapters, the helpers only they share, and the selector that loads both adapters.
    if (p[2] === 'aws' || p[2] === 'embedded' || p[2] === 'adapter-kit') return `engine/${p[2]}`;
    // Every other file of engine/ is the ports' contract: the only part of the engine a domain module sees.
    return p[2] === 'index.ts' ? 'engine/index' : 'engine';
  }
  return p[1];
}

const SETTINGS = 'lambdas/shared/settings.ts';

/** Layers every layer may import: leaves that import no project file themselves (their rule says so). */
export const READ_BY_EVERY_LAYER = ['settings'];

/** What each layer may import: layers, or single files (`lambdas/...ts`), and packages. */
export interface LayerRule {
  layers: string[];
  files?: string[];
  /** Package names or prefixes ending in `/`; node: built-ins are always allowed. */
  packages: string[];
}

const PURE = ['zod'];
const DOMAIN_PACKAGES = PURE;

export const LAYER_RULES: Record<string, LayerRule> = {
  // The leaf: typed settings from the environment, read by every layer (READ_BY_EVERY_LAYER).
  settings: { layers: [], packages: [] },
  // The floor: the ports' contract (ports, errors, limits, clock, the event-bus port, queue names, the item size rule).
  engine: { layers: [], packages: [] },
  // Errors, ids, logs, hooks, and the building blocks over the ports (idempotency, counters, leases, cursors).
  shared: { layers: ['engine'], packages: PURE },
  // What both adapters share (cursor encoding, update semantics, request checks, memos): adapters only.
  'engine/adapter-kit': { layers: ['engine', 'shared'], packages: [] },
  'engine/aws': { layers: ['engine', 'engine/adapter-kit', 'shared'], packages: ['@aws-sdk/', 'aws-lambda'] },
  'engine/embedded': { layers: ['engine', 'engine/adapter-kit', 'shared'], packages: ['better-sqlite3', 'hnswlib-node', 'ws'] },
  'engine/index': { layers: ['engine', 'engine/adapter-kit', 'engine/aws', 'engine/embedded', 'shared'], packages: [] },
  // Domain modules: never http, never an adapter or its helpers, never an AWS SDK.
  auth: { layers: ['engine', 'shared'], packages: DOMAIN_PACKAGES },
  activity: { layers: ['auth', 'engine', 'shared'], packages: DOMAIN_PACKAGES },
  data: { layers: ['auth', 'engine', 'shared'], packages: DOMAIN_PACKAGES },
  ai: { layers: ['auth', 'activity', 'ai/providers/bedrock', 'engine', 'shared'], packages: DOMAIN_PACKAGES },
  // The Bedrock providers (registered by ai/providers/index.ts and ai/providers/rerank/index.ts): the Bedrock Runtime
  // and Agent Runtime (Rerank) SDKs, nothing else of AWS.
  'ai/providers/bedrock': { layers: ['ai', 'engine', 'shared'], packages: [...DOMAIN_PACKAGES, '@aws-sdk/client-bedrock-runtime', '@aws-sdk/client-bedrock-agent-runtime'] },
  // The vector database: embeds through the AI gateway, reranks through the AI providers.
  vector: { layers: ['auth', 'activity', 'ai', 'engine', 'shared'], packages: DOMAIN_PACKAGES },
  // Knowledge collections and their uploads: the workspace of a key and its vectors, the AI API's operation rules;
  // the document parsers (PDF, DOCX, HTML, Markdown) and the tokenizer that chunks their text, all pure JS that bundles.
  knowledge: { layers: ['auth', 'activity', 'ai', 'vector', 'engine', 'shared'], packages: [...DOMAIN_PACKAGES, 'unpdf', 'mammoth', 'htmlparser2', 'marked', 'js-tiktoken'] },
  // OpenAI's Files, Vector stores and Responses (docs/ai/openai-compatibility.md): a thin mapping onto uploads, collections and chat.
  'ai/openai-compat': { layers: ['auth', 'activity', 'ai', 'vector', 'knowledge', 'engine', 'shared'], packages: [...DOMAIN_PACKAGES, 'busboy'] },
  // ipaddr.js: the address ranges a webhook may not reach (events/webhook-url.ts).
  events: { layers: ['auth', 'activity', 'data', 'engine', 'shared'], packages: [...DOMAIN_PACKAGES, 'ipaddr.js'] },
  // The console's people, invitations, passwords and sessions (issue 37): over the tenants and the ports; the
  // breached-password list of @zxcvbn-ts/language-common (data only); WebAuthn's checks by @simplewebauthn/server (passkeys.ts).
  console: { layers: ['auth', 'engine', 'shared'], packages: [...DOMAIN_PACKAGES, '@zxcvbn-ts/language-common', '@simplewebauthn/server'] },
  // The HTTP layer turns requests into service calls and errors into answers; it knows every domain module.
  http: { layers: ['http', 'auth', 'console', 'activity', 'data', 'ai', 'ai/openai-compat', 'vector', 'knowledge', 'events', 'engine', 'engine/index', 'shared'], packages: ['@middy/core', 'aws-lambda', ...PURE] },
  // The local runtime translates node:http into API Gateway events, runs the embedded engine, and
  // runs the queue consumers the functions in AWS run (consumers/jobs.ts: jobsConsumer).
  // The API documents: built from the route table and the domain modules' schemas; read only by scripts/openapi.ts and tests.
  openapi: { layers: ['http', 'auth', 'activity', 'data', 'ai', 'ai/openai-compat', 'vector', 'knowledge', 'events', 'engine', 'shared'], packages: PURE },
  local: { layers: ['http', 'auth', 'console', 'activity', 'events', 'knowledge', 'consumers', 'engine', 'engine/embedded', 'engine/index', 'shared'], packages: ['aws-lambda', 'ws'] },
  // Queue consumers, scheduled and notified functions in AWS (SQS-, EventBridge- and S3-triggered
  // handlers): the engine from the settings, the SQS adapter's handler shape, the domain's consumer, and
  // the after-commit hook bindings the HTTP functions bind too (a consumer running a data service fires
  // the same activity entries and platform events).
  consumers: { layers: ['events', 'data', 'vector', 'knowledge', 'activity', 'engine', 'engine/aws', 'engine/index', 'shared'], files: ['lambdas/http/hook-bindings.ts'], packages: ['aws-lambda'] },
  // Lambda@Edge functions (no environment, us-east-1): a header rewrite and an HTTP call to the API; the
  // body limit and the error shape they share with the routes, nothing that reaches a store.
  edge: { layers: ['shared'], files: ['lambdas/http/event.ts', 'lambdas/http/error-response.ts'], packages: ['aws-lambda'] },
  admin: { layers: ['auth', 'console', 'ai', 'vector', 'data', 'events', 'engine', 'engine/index', 'shared'], packages: PURE },
  // The stack reads the route table and the settings it must set, never a handler or a service.
  lib: {
    layers: ['lib'],
    files: ['lambdas/http/routes.ts', 'lambdas/shared/api.ts', 'lambdas/shared/counters.ts', 'lambdas/activity/segments.ts', 'lambdas/engine/queues.ts', 'lambdas/engine/aws/table.ts', 'lambdas/engine/aws/staging.ts', 'lambdas/shared/console-headers.ts'],
    // esbuild: a Lambda@Edge function's code is bundled at synthesis as NodejsFunction bundles the others.
    packages: ['aws-cdk-lib', 'constructs', 'cdk-nag', 'esbuild'],
  },
  bin: { layers: ['bin', 'lib', 'local', 'admin', 'engine/embedded', 'engine/index', 'shared'], packages: ['aws-cdk-lib', 'cdk-nag'] },
};

const IMPORT = /(?:^|\n)\s*(?:import|export)\s[^;]*?\sfrom\s*'([^']+)'|import\(\s*'([^']+)'\s*\)/g;

function sources(root: string, dir: string): string[] {
  return readdirSync(join(root, dir), { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(root, join(dir, e.name)) : e.name.endsWith('.ts') && !e.name.endsWith('.d.ts') ? [join(dir, e.name)] : [],
  );
}

/** Every import of the files under `dirs` (repo-relative), read from disk. */
export function readImports(root: string, dirs: string[]): Import[] {
  const files = Object.fromEntries(dirs.flatMap((d) => sources(root, d)).map((f) => [f, readFileSync(join(root, f), 'utf8')]));
  return importsOf(files);
}

/** Every import of the given sources (path -> text). */
export function importsOf(files: Record<string, string>): Import[] {
  const out: Import[] = [];
  for (const [file, text] of Object.entries(files)) {
    for (const m of text.matchAll(IMPORT)) {
      const spec = m[1] ?? m[2];
      const line = text.slice(0, m.index! + m[0].length).split('\n').length;
      const to = spec.startsWith('.') ? posix.join(posix.dirname(file), spec).replace(/\.js$/, '.ts') : spec;
      out.push({ from: file, to, line });
    }
  }
  return out;
}

const packageName = (spec: string) => (spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]);

/** The imports no rule allows, as readable lines. */
export function violations(imports: Import[], rules: Record<string, LayerRule> = LAYER_RULES): string[] {
  const out: string[] = [];
  for (const imp of imports) {
    const layer = layerOf(imp.from);
    if (!layer) continue;
    const rule = rules[layer];
    if (!rule) {
      out.push(`${imp.from}: layer "${layer}" has no rule (add it to LAYER_RULES and docs/architecture.md)`);
      continue;
    }
    const local = imp.to.startsWith('lambdas/') || imp.to.startsWith('lib/') || imp.to.startsWith('bin/');
    if (local) {
      const target = layerOf(imp.to)!;
      if (target === layer || rule.layers.includes(target) || READ_BY_EVERY_LAYER.includes(target) || rule.files?.includes(imp.to)) continue;
      out.push(`${imp.from}:${imp.line} (${layer}) imports ${imp.to} (${target})`);
    } else {
      if (imp.to.startsWith('node:')) continue;
      const name = packageName(imp.to);
      if (rule.packages.some((p) => (p.endsWith('/') ? imp.to.startsWith(p) : name === p))) continue;
      out.push(`${imp.from}:${imp.line} (${layer}) imports the package ${imp.to}`);
    }
  }
  return out;
}

/**
 * The file-level import cycles among project files: each strongly connected component of more than
 * one file, its files sorted. Type-only imports count: erased at run time, they still make two files
 * that cannot be read or changed one without the other (docs/architecture.md).
 */
export function cycles(imports: Import[]): string[][] {
  const next = new Map<string, Set<string>>();
  for (const { from, to } of imports) {
    if (!/^(lambdas|lib|bin)\//.test(to) || to === from) continue;
    if (!next.has(from)) next.set(from, new Set());
    next.get(from)!.add(to);
  }
  // Tarjan's algorithm.
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const out: string[][] = [];
  const visit = (v: string) => {
    index.set(v, index.size);
    low.set(v, index.get(v)!);
    stack.push(v);
    onStack.add(v);
    for (const w of next.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1) out.push(component.sort());
  };
  for (const v of next.keys()) if (!index.has(v)) visit(v);
  return out;
}
