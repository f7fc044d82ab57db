/**
 * The typed client (clients/typescript) as its README shows it: the README's example, run against the
 * local platform, and the example in the README is the file that runs. The types it is checked with
 * are the committed generated ones (test/unit/openapi-documents.test.ts keeps them current).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { quickstart } from '../../clients/typescript/examples/quickstart.js';
import { createDataClient } from '../../clients/typescript/src/index.js';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';

const CLIENT = join(import.meta.dirname, '..', '..', 'clients', 'typescript');

describe('the TypeScript client', () => {
  let platform: TestPlatform;
  beforeAll(async () => {
    platform = await startTestPlatform();
  });
  afterAll(() => platform?.close());

  it("runs the README's example against the local platform", async () => {
    const result = await quickstart({ dataUrl: platform.urls.data, eventsUrl: platform.urls.events, key: platform.credentials.secret_key, workspaceId: platform.credentials.workspace_id });
    expect(result).toMatchObject({ order: { total: 42, version: 1 }, listed: 1, pulled: ['order.created'], acked: 1 });
  });

  it('shows the example the test runs', () => {
    const readme = readFileSync(join(CLIENT, 'README.md'), 'utf8');
    const example = readFileSync(join(CLIENT, 'examples', 'quickstart.ts'), 'utf8');
    const body = example.slice(example.indexOf('export async function'));
    expect(readme).toContain(body.trim());
  });

  it('answers an error as data, in the one error shape', async () => {
    const data = createDataClient({ baseUrl: platform.urls.data, credential: platform.credentials.secret_key });
    const { data: answer, error, response } = await data.PUT('/v1/databases/{database}', { params: { path: { database: 'Not Valid' } } });
    expect(answer).toBeUndefined();
    expect(response.status).toBe(400);
    expect(error?.error.code).toBe('invalid_name');
  });
});
