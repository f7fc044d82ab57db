/** `npm run openapi -- --out DIR --outputs FILE`: the documents a deployer publishes, with the deployment's base addresses. */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..', '..');
const dir = mkdtempSync(join(tmpdir(), 'openapi-out-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

it("writes the three documents with the stack's AiUrl, DataUrl and EventsUrl as their server", () => {
  const outputs = join(dir, 'cdk-outputs.json');
  writeFileSync(outputs, JSON.stringify({ PlatformStack: { AiUrl: 'https://ai.example.cloudfront.net', DataUrl: 'https://data.example.cloudfront.net/', EventsUrl: 'https://events.example.cloudfront.net', TableName: 't' } }));
  execFileSync(join(ROOT, 'node_modules', '.bin', 'tsx'), ['scripts/openapi.ts', '--out', join(dir, 'out'), '--outputs', outputs], { cwd: ROOT, stdio: 'pipe' });
  const read = (api: string) => JSON.parse(readFileSync(join(dir, 'out', `${api}.json`), 'utf8'));
  expect(read('ai').servers).toEqual([{ url: 'https://ai.example.cloudfront.net', description: 'This deployment' }]);
  expect(read('data').servers[0].url).toBe('https://data.example.cloudfront.net');
  expect(read('events').servers[0].url).toBe('https://events.example.cloudfront.net');
  const committed = JSON.parse(readFileSync(join(ROOT, 'docs', 'openapi', 'events.json'), 'utf8'));
  expect({ ...read('events'), servers: committed.servers }).toEqual(committed);
});
