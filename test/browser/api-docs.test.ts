/**
 * The operations port's `/docs` in headless Chromium: Scalar renders the three OpenAPI documents
 * (the operation each test document names shows, `?api=` opening the one asked for), and every
 * request the page makes, its scripts, the documents and anything Scalar would fetch besides (fonts,
 * a proxy, telemetry), goes to the ops port's own origin (docs/decisions/openapi-serving.md); the
 * committed documents render too.
 *
 * Chromium comes from Debian (/usr/bin/chromium, installed by `npm test`'s pretest); without it this
 * suite fails rather than skips.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { createEmbeddedEngine, type EmbeddedEngine } from '../../lambdas/engine/embedded/index.js';
import { createOpsServer } from '../../lambdas/local/ops-server.js';
import { DEFAULT_OPENAPI_DIR } from '../../lambdas/local/api-docs.js';
import { launchChromium, requireChromium } from '../helpers/browser.js';
import { writeTestDocuments } from '../helpers/openapi-documents.js';

const TIMEOUT = 120_000;
/** Parsing Scalar's 3.5 MB bundle takes seconds on a busy machine. */
const RENDERED_WITHIN_MS = 60_000;

let dir = '';
let engine: EmbeddedEngine | undefined;
let server: Server | undefined;
let browser: Browser | undefined;
let origin = '';
/** An ops port serving the committed documents (docs/openapi/, its default). */
let committed: Server | undefined;
let committedOrigin = '';

beforeAll(async () => {
  requireChromium();
  process.env.LOG_LEVEL ??= 'silent';
  dir = mkdtempSync(join(tmpdir(), 'api-docs-'));
  engine = createEmbeddedEngine({ dataDir: dir });
  server = createOpsServer(engine, { openapiDir: writeTestDocuments(mkdtempSync(join(dir, 'openapi-')), ['ai', 'data', 'events']) });
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  committed = createOpsServer(engine);
  await new Promise<void>((resolve) => committed!.listen(0, '127.0.0.1', resolve));
  committedOrigin = `http://127.0.0.1:${(committed.address() as AddressInfo).port}`;
  browser = await launchChromium();
}, TIMEOUT);

afterAll(async () => {
  await browser?.close();
  for (const s of [server, committed]) await new Promise((resolve) => (s ? s.close(resolve) : resolve(undefined)));
  await engine?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** Opens `path` in a fresh page, recording every request it makes and every policy violation it reports. */
async function open(path: string, at = origin): Promise<{ page: Page; requests: string[]; violations: string[] }> {
  const context = await browser!.newContext();
  const page = await context.newPage();
  const requests: string[] = [];
  const violations: string[] = [];
  page.on('request', (r) => requests.push(r.url()));
  page.on('console', (m) => {
    if (/Content Security Policy/i.test(m.text())) violations.push(m.text());
  });
  // The bundle takes seconds to load on a busy machine: what shows is waited for instead of `load`.
  await page.goto(`${at}${path}`, { waitUntil: 'commit' });
  return { page, requests, violations };
}

/**
 * Resolves once the page made no new request for `quietMs` (Playwright's `networkidle` never comes
 * for a page whose icon is a data: URL): whatever Scalar fetches once rendered (fonts as text is laid
 * out, anything on a timer shortly after) has been asked for by then.
 */
async function settled(requests: string[], quietMs = 2000): Promise<void> {
  for (let seen = -1; seen !== requests.length; ) {
    seen = requests.length;
    await new Promise((resolve) => setTimeout(resolve, quietMs));
  }
}

const elsewhere = (requests: string[], at = origin) => requests.filter((url) => !url.startsWith('data:') && new URL(url).origin !== at);

describe('/docs', () => {
  it('renders the AI API\'s document first, fetching only from the ops port', async () => {
    const { page, requests, violations } = await open('/docs');
    await page.getByText('List the ai widgets').first().waitFor({ state: 'visible', timeout: RENDERED_WITHIN_MS });
    await settled(requests);
    expect(elsewhere(requests)).toEqual([]);
    expect(requests).toEqual(expect.arrayContaining([`${origin}/docs`, `${origin}/docs/assets/scalar-standalone.js`, `${origin}/docs/assets/docs.js`, `${origin}/openapi/ai.json`]));
    // Only what the page's policy refuses on purpose may show: nothing at all so far.
    expect(violations).toEqual([]);
    await page.context().close();
  }, TIMEOUT);

  it('opens the document `?api=` names, and switches to another from its selector', async () => {
    const { page, requests, violations } = await open('/docs?api=data');
    await page.getByText('List the data widgets').first().waitFor({ state: 'visible', timeout: RENDERED_WITHIN_MS });
    expect(requests).toContain(`${origin}/openapi/data.json`);
    // The selector names the document shown and lists the other two.
    await page.getByRole('button', { name: 'Data API' }).click();
    expect((await page.getByRole('option').allInnerTexts()).map((t) => t.trim())).toEqual(['AI API', 'Data API', 'Events API']);
    await page.getByRole('option', { name: 'Events API' }).click();
    await page.getByText('List the events widgets').first().waitFor({ state: 'visible', timeout: RENDERED_WITHIN_MS });
    await settled(requests);
    expect(requests).toContain(`${origin}/openapi/events.json`);
    expect(elsewhere(requests)).toEqual([]);
    expect(violations).toEqual([]);
    await page.context().close();
  }, TIMEOUT);

  it('renders each committed document (docs/openapi/), fetching only from the ops port', async () => {
    const { page, requests, violations } = await open('/docs', committedOrigin);
    const sources = [
      ['ai', 'AI API'],
      ['data', 'Data API'],
      ['events', 'Events API'],
    ];
    for (const [i, [api, source]] of sources.entries()) {
      if (i > 0) {
        await page.getByRole('button', { name: sources[i - 1][1] }).click();
        await page.getByRole('option', { name: source }).click();
      }
      const { info } = JSON.parse(readFileSync(join(DEFAULT_OPENAPI_DIR, `${api}.json`), 'utf8')) as { info: { title: string } };
      await page.getByRole('heading', { level: 1, name: info.title }).waitFor({ state: 'visible', timeout: RENDERED_WITHIN_MS });
      expect(requests).toContain(`${committedOrigin}/openapi/${api}.json`);
    }
    await settled(requests);
    expect(elsewhere(requests, committedOrigin)).toEqual([]);
    expect(violations).toEqual([]);
    await page.context().close();
  }, TIMEOUT);
});
