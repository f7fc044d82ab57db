/**
 * `npm run bench -- console`: the console's first page load in headless Chromium (issue 37), against a
 * bare static page served the same way.
 *
 * - Bytes: what the first load of a signed-in person's overview transfers for its HTML, JS and CSS
 *   (the encoded bodies and the headers, as Chromium received them gzip-compressed; the console API's
 *   JSON answers are not counted). Target under 200 KB.
 * - Time to interactive: from the navigation's start to the overview rendered with its data (its
 *   "Feature switches" section, drawn after `GET /me` and `GET /overview` answered, so its controls work),
 *   read on the page's own clock (`performance.now()`) at the first animation frame that shows it.
 *   Target under 1 s.
 * - Baseline: the same console server (createApiServer with console-files.ts, gzip and headers alike)
 *   serving a minimal static page (one index.html with an <h1>, no script, no stylesheet), measured the
 *   same way (its <h1> shown), in the same rounds, alternated with the console's.
 *
 * Every load is a new browser context (an empty cache: a first visit), signed in by cookie. Knob:
 * BENCH_ROUNDS (7). Never part of `npm test`.
 */
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import type { Browser, Page } from 'playwright-core';
import { envNumber } from './support/env.js';
import { makeTempDir, ROOT } from './support/processes.js';
import { fmt } from './support/table.js';
import type { Benchmark, BenchReport } from './support/types.js';
import { launchChromium, requireChromium } from '../test/helpers/browser.js';
import { createEmbeddedEngine } from '../lambdas/engine/embedded/index.js';
import { bootstrap } from '../lambdas/local/bootstrap.js';
import { startPlatform } from '../lambdas/local/platform.js';
import { createApiServer } from '../lambdas/local/http-server.js';
import { consoleFiles } from '../lambdas/local/console-files.js';
import { ROUTES } from '../lambdas/http/routes.js';
import type { RouteFunction } from '../lambdas/http/handler.js';
import { Invitations } from '../lambdas/console/invitations.js';

const TARGET_KB = 200;
const TARGET_MS = 1000;
const BARE_HTML = '<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>Bare</title></head><body><h1>Ready</h1></body></html>\n';

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};

interface Load {
  /** HTML + JS + CSS as transferred: encoded bodies and response headers, bytes. */
  bytes: number;
  /** Of those, the bodies only. */
  bodyBytes: number;
  files: number;
  ms: number;
}

/** One first visit in a new context: what its document, scripts and stylesheets cost, and when `ready` showed. */
async function firstLoad(browser: Browser, url: string, ready: string, cookies: Array<{ name: string; value: string }>): Promise<Load> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  try {
    if (cookies.length) await context.addCookies(cookies.map((c) => ({ ...c, url })));
    const page: Page = await context.newPage();
    const counted: Promise<{ body: number; headers: number }>[] = [];
    page.on('requestfinished', (request) => {
      if (['document', 'script', 'stylesheet'].includes(request.resourceType())) {
        counted.push(request.sizes().then((s) => ({ body: s.responseBodySize, headers: s.responseHeadersSize })));
      }
    });
    await page.goto(url, { waitUntil: 'commit' });
    // The page's own clock: 0 is the navigation's start; polled each animation frame.
    const ms = (await (
      // A function, not a string (the console's CSP forbids eval); typed loosely: this file has no DOM types.
      await page.waitForFunction(
        (text: string) => {
          const headings: Array<{ textContent: string | null }> = [...(globalThis as any).document.querySelectorAll('h1, h2')];
          return headings.some((h) => h.textContent?.trim() === text) ? performance.now() : false;
        },
        ready,
        { polling: 'raf', timeout: 30_000 },
      )
    ).jsonValue()) as number;
    await page.waitForLoadState('networkidle');
    const sizes = await Promise.all(counted);
    return { bytes: sizes.reduce((s, x) => s + x.body + x.headers, 0), bodyBytes: sizes.reduce((s, x) => s + x.body, 0), files: sizes.length, ms };
  } finally {
    await context.close();
  }
}

async function loadHandler(route: { handler: string }): Promise<RouteFunction> {
  const mod = await import(pathToFileURL(join(ROOT, 'lambdas', `${route.handler}.ts`)).href);
  return mod.handler as RouteFunction;
}

export const benchmark: Benchmark = {
  name: 'console',
  title: "The console's first page load (HTML + JS + CSS, compressed) and time to interactive in headless Chromium, against a bare static page served the same way",
  async run(progress): Promise<BenchReport> {
    const rounds = envNumber('BENCH_ROUNDS', 7);
    requireChromium();
    execFileSync(process.execPath, [join(ROOT, 'scripts', 'build-console.mjs'), '--if-stale'], { cwd: ROOT, stdio: 'inherit' });
    const temp = makeTempDir('bench-console-');
    let bare: Server | undefined;
    let browser: Browser | undefined;
    const engine = createEmbeddedEngine({ dataDir: join(temp.path, 'data') });
    const { credentials } = await bootstrap(engine, join(temp.path, 'data'));
    const platform = await startPlatform({ engine, ports: { ai: 0, data: 0, events: 0 }, consolePort: 0 });
    try {
      const consoleUrl = platform.consoleUrl!;
      // The baseline: the console's own server construction (as platform.ts makes it), another dist.
      const bareDist = join(temp.path, 'bare');
      execFileSync('mkdir', ['-p', bareDist]);
      writeFileSync(join(bareDist, 'index.html'), BARE_HTML);
      bare = await createApiServer('console', ROUTES, loadHandler, undefined, { prefix: '/console/api/', serve: consoleFiles(bareDist).serve });
      await new Promise<void>((r) => bare!.listen(0, '127.0.0.1', () => r()));
      const bareUrl = `http://127.0.0.1:${(bare.address() as AddressInfo).port}`;

      // A signed-in owner (the accept route), whose cookies each new context carries.
      const { token } = await new Invitations(engine.kv, () => engine.clock.now()).create({ organizationId: credentials.organization_id, email: 'bench@example.com', role: 'owner' });
      const accepted = await fetch(`${consoleUrl}/console/api/invitation/accept`, {
        method: 'POST',
        headers: { origin: consoleUrl, 'content-type': 'application/json' },
        body: JSON.stringify({ token, password: 'a benchmark password, 37 long enough' }),
      });
      if (accepted.status !== 200) throw new Error(`accept answered ${accepted.status}: ${await accepted.text()}`);
      const cookies = accepted.headers.getSetCookie().map((c) => {
        const [pair] = c.split(';');
        const eq = pair.indexOf('=');
        return { name: pair.slice(0, eq), value: pair.slice(eq + 1) };
      });

      browser = await launchChromium();
      // Two warm-up loads of each (the server's file cache, Chromium's first-process costs).
      for (let i = 0; i < 2; i++) {
        await firstLoad(browser, `${bareUrl}/`, 'Ready', []);
        await firstLoad(browser, `${consoleUrl}/`, 'Feature switches', cookies);
      }
      const ours: Load[] = [];
      const base: Load[] = [];
      for (let round = 1; round <= rounds; round++) {
        // Alternated, the order flipped each round: a slow spell hits both sides.
        const pair = round % 2 ? ['bare', 'console'] : ['console', 'bare'];
        for (const side of pair) {
          if (side === 'bare') base.push(await firstLoad(browser, `${bareUrl}/`, 'Ready', []));
          else ours.push(await firstLoad(browser, `${consoleUrl}/`, 'Feature switches', cookies));
        }
        progress(`round ${round}/${rounds}: console ${fmt(ours.at(-1)!.ms, 0)} ms, ${fmt(ours.at(-1)!.bytes / 1024, 1)} KiB; bare ${fmt(base.at(-1)!.ms, 0)} ms, ${fmt(base.at(-1)!.bytes / 1024, 2)} KiB`);
      }

      const kb = median(ours.map((l) => l.bytes)) / 1024;
      const bareKb = median(base.map((l) => l.bytes)) / 1024;
      const ms = median(ours.map((l) => l.ms));
      const bareMs = median(base.map((l) => l.ms));
      const pass = kb < TARGET_KB && ms < TARGET_MS;
      return {
        tables: [
          {
            title: `First page load, median of ${rounds} rounds (each a new context: empty cache), local console server, headless Chromium`,
            headers: ['page', 'files', 'HTML+JS+CSS KiB (gzip, with headers)', 'bodies KiB', 'interactive ms', 'ms per round'],
            rows: [
              ['console overview (signed in)', String(ours[0].files), fmt(kb, 1), fmt(median(ours.map((l) => l.bodyBytes)) / 1024, 1), fmt(ms, 0), ours.map((l) => fmt(l.ms, 0)).join(' ')],
              ['bare static page (baseline)', String(base[0].files), fmt(bareKb, 2), fmt(median(base.map((l) => l.bodyBytes)) / 1024, 2), fmt(bareMs, 0), base.map((l) => fmt(l.ms, 0)).join(' ')],
              ['ratio console / bare', '', `${fmt(kb / bareKb, 1)}×`, '', `${fmt(ms / bareMs, 2)}×`, ''],
            ],
            align: ['l', 'r', 'r', 'r', 'r', 'l'],
          },
        ],
        notes: [
          'interactive: the overview drawn with its data (after GET /me and GET /overview), on the page clock from the navigation start',
          'bytes: document, scripts and stylesheets as received (Content-Encoding gzip); the console API JSON not counted',
          `node ${process.version}; Chromium /usr/bin/chromium headless`,
        ],
        figures: [
          { name: 'console first load KiB', value: kb, digits: 1 },
          { name: 'bare page KiB', value: bareKb, digits: 2 },
          { name: 'console interactive ms', value: ms },
          { name: 'bare page interactive ms', value: bareMs },
        ],
        verdict: {
          pass,
          summary: `first load ${fmt(kb, 1)} KiB compressed (target < ${TARGET_KB} KB; ${fmt(kb / bareKb, 1)}× the bare page's ${fmt(bareKb, 2)} KiB), interactive in ${fmt(ms, 0)} ms (target < ${TARGET_MS} ms; ${fmt(ms / bareMs, 2)}× the bare page's ${fmt(bareMs, 0)} ms)`,
        },
      };
    } finally {
      await browser?.close().catch(() => {});
      await new Promise((r) => (bare ? bare.close(r) : r(undefined)));
      await platform.close();
      temp.remove();
    }
  },
};
