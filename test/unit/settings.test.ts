/**
 * The settings (lambdas/shared/settings.ts): the defaults, a message naming each bad variable, the
 * overrides of tests, and the documentation (docs/settings.md) kept equal to the definitions.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join, relative } from 'node:path';
import { DEFINITIONS, ENV, loadSettings, settings, SettingsError, settingsTable, useSettings } from '../../lambdas/shared/settings.js';

const ROOT = join(import.meta.dirname, '..', '..');

/** The error loadSettings throws for `env` (fails the test when it throws none). */
function errorFor(env: Record<string, string>): SettingsError {
  try {
    loadSettings(env);
  } catch (error) {
    expect(error).toBeInstanceOf(SettingsError);
    return error as SettingsError;
  }
  throw new Error(`no error for ${JSON.stringify(env)}`);
}

/** The variables a message reports, one a line (`  NAME="value": reason (doc)`). */
const reported = (message: string) => [...message.matchAll(/^ {2}([A-Z][A-Z0-9_]*)=/gm)].map((m) => m[1]);

afterEach(() => {
  vi.unstubAllEnvs();
  useSettings();
});

describe('loadSettings', () => {
  it('gives every default with an empty environment, and no value to the optional ones', () => {
    expect(loadSettings({})).toStrictEqual({
      engine: 'embedded',
      dataDir: '.platform',
      logLevel: 'info',
      credentialCacheMs: 30_000,
      modelRoutesCacheMs: 1000,
      eventsRateLimitPerMinute: 600,
      dataRateLimitPerMinute: 0,
      collectionRetentionSeconds: 2_592_000,
      knowledgeLeaseSeconds: 120,
      collectionIndexSweepSeconds: 86_400,
      uploadCheckWithinMs: 20_000,
      fileFormIdleMs: 30_000,
      ffmpegPath: 'ffmpeg',
      localWorkers: availableParallelism() <= 2 ? 1 : Math.min(availableParallelism(), 4),
      backgroundWorkers: 1,
      knowledgeMaxMemoryMb: 1024,
      knowledgeMaxCpuSeconds: 60,
      knowledgeMaxQueuedItems: 500,
      knowledgeJobTranscriptionConcurrency: 4,
      knowledgeJobStepBudgetMs: 600_000,
      backlogDegradedSeconds: 300,
      aiPort: 8080,
      dataPort: 8081,
      eventsPort: 8082,
      opsPort: 8083,
      consolePort: 8084,
    });
  });

  it('takes valid values, the limits of each range included', () => {
    const s = loadSettings({
      ENGINE: 'aws',
      DATA_DIR: '/tmp/x',
      TABLE_NAME: 't',
      BUCKET_NAME: 'b',
      QUEUE_URLS: '{"events":"https://sqs.eu-west-1.amazonaws.com/1/q"}',
      CONNECTIONS_ENDPOINT: 'https://ws.example/prod',
      SIGNING_KEY_IDS: '["k1","k2"]',
      LOG_LEVEL: 'silent',
      CREDENTIAL_CACHE_MS: '60000',
      MODEL_ROUTES_CACHE_MS: '0',
      EVENTS_RATE_LIMIT_PER_MINUTE: '0',
      DATA_RATE_LIMIT_PER_MINUTE: '1000000',
      COLLECTION_RETENTION_S: '1',
      KNOWLEDGE_LEASE_S: '2',
      COLLECTION_INDEX_SWEEP_S: '1',
      UPLOAD_CHECK_WITHIN_MS: '25000',
      FILE_FORM_IDLE_MS: '300000',
      FFMPEG_PATH: '/opt/ffmpeg/bin/ffmpeg',
      LOCAL_WORKERS: '1',
      BACKGROUND_WORKERS: '16',
      KNOWLEDGE_MAX_MEMORY_MB: '128',
      KNOWLEDGE_MAX_CPU_S: '3600',
      KNOWLEDGE_MAX_QUEUED_ITEMS: '1',
      KNOWLEDGE_JOB_TRANSCRIPTION_CONCURRENCY: '64',
      KNOWLEDGE_JOB_STEP_BUDGET_MS: '1',
      BACKLOG_DEGRADED_S: '86400',
      AI_PORT: '0',
      DATA_PORT: '65535',
      EVENTS_PORT: '9000',
      OPS_PORT: '0',
      CONSOLE_PORT: '65535',
      CONSOLE_URL: 'https://console.example',
    });
    expect(s).toStrictEqual({
      engine: 'aws',
      dataDir: '/tmp/x',
      tableName: 't',
      bucketName: 'b',
      queueUrls: { events: 'https://sqs.eu-west-1.amazonaws.com/1/q' },
      connectionsEndpoint: 'https://ws.example/prod',
      signingKeyIds: ['k1', 'k2'],
      logLevel: 'silent',
      credentialCacheMs: 60_000,
      modelRoutesCacheMs: 0,
      eventsRateLimitPerMinute: 0,
      dataRateLimitPerMinute: 1_000_000,
      collectionRetentionSeconds: 1,
      knowledgeLeaseSeconds: 2,
      collectionIndexSweepSeconds: 1,
      uploadCheckWithinMs: 25_000,
      fileFormIdleMs: 300_000,
      ffmpegPath: '/opt/ffmpeg/bin/ffmpeg',
      localWorkers: 1,
      backgroundWorkers: 16,
      knowledgeMaxMemoryMb: 128,
      knowledgeMaxCpuSeconds: 3600,
      knowledgeMaxQueuedItems: 1,
      knowledgeJobTranscriptionConcurrency: 64,
      knowledgeJobStepBudgetMs: 1,
      backlogDegradedSeconds: 86_400,
      aiPort: 0,
      dataPort: 65_535,
      eventsPort: 9000,
      opsPort: 0,
      consolePort: 65_535,
      consoleUrl: 'https://console.example',
    });
  });

  it('takes an empty variable as unset: its default', () => {
    const s = loadSettings({ CREDENTIAL_CACHE_MS: '', ENGINE: '', LOG_LEVEL: '', TABLE_NAME: '', QUEUE_URLS: '' });
    expect(s.credentialCacheMs).toBe(30_000);
    expect(s.engine).toBe('embedded');
    expect(s.logLevel).toBe('info');
    expect(s).not.toHaveProperty('tableName');
    expect(s).not.toHaveProperty('queueUrls');
  });

  it.each([
    ['CREDENTIAL_CACHE_MS', 'abc', 'must be a whole number'], // Number('abc') is NaN: it used to turn the cache off
    ['CREDENTIAL_CACHE_MS', '-5', 'must be a whole number'],
    ['CREDENTIAL_CACHE_MS', '1.5', 'must be a whole number'],
    ['CREDENTIAL_CACHE_MS', '999999', 'must be at most 60000'],
    ['CREDENTIAL_CACHE_MS', ' 100', 'must be a whole number'],
    ['LOG_LEVEL', 'loud', 'expected one of'],
    ['ENGINE', 'mysql', 'expected one of'],
    ['LOCAL_WORKERS', '0', 'must be at least 1'],
    ['LOCAL_WORKERS', '65', 'must be at most 64'],
    ['AI_PORT', '70000', 'must be at most 65535'],
    ['COLLECTION_RETENTION_S', '2592001', 'must be at most 2592000'],
    ['KNOWLEDGE_LEASE_S', '1', 'must be at least 2'],
    ['COLLECTION_INDEX_SWEEP_S', '0', 'must be at least 1'],
    ['EVENTS_RATE_LIMIT_PER_MINUTE', '1e3', 'must be a whole number'],
    ['QUEUE_URLS', '{not json', 'must be JSON'],
    ['QUEUE_URLS', '{"events":"not a url"}', 'URL'],
    ['SIGNING_KEY_IDS', '[]', '>=1'],
    ['SIGNING_KEY_IDS', '"k1"', 'expected array'],
    ['CONNECTIONS_ENDPOINT', 'ws-endpoint', 'URL'],
  ])('%s=%s is refused with a message naming the variable', (variable, value, reason) => {
    const error = errorFor({ [variable]: value });
    expect(reported(error.message)).toEqual([variable]);
    expect(error.message).toContain(`${variable}=${JSON.stringify(value)}: `);
    expect(error.message).toContain(reason);
    // …and what the setting is for, from its definition.
    const definition = Object.values(DEFINITIONS).find((d) => d.env === variable)!;
    expect(error.message).toContain(definition.doc);
  });

  it('reports every bad value at once, in the order of the definitions', () => {
    const error = errorFor({ AI_PORT: '70000', CREDENTIAL_CACHE_MS: 'abc', LOG_LEVEL: 'loud', ENGINE: 'mysql', DATA_DIR: '/ok' });
    expect(reported(error.message)).toEqual(['ENGINE', 'LOG_LEVEL', 'CREDENTIAL_CACHE_MS', 'AI_PORT']);
    expect(error.message.startsWith('Invalid settings:\n')).toBe(true);
  });

  it('shortens a long bad value in the message', () => {
    const value = 'x'.repeat(500);
    const error = errorFor({ QUEUE_URLS: value });
    expect(error.message).toContain(`QUEUE_URLS="${'x'.repeat(80)}…"`);
    expect(error.message).not.toContain('x'.repeat(81));
  });
});

describe('settings() and useSettings()', () => {
  it('reads the environment once, on first use', () => {
    vi.stubEnv('CREDENTIAL_CACHE_MS', '1234');
    useSettings();
    expect(settings().credentialCacheMs).toBe(1234);
    vi.stubEnv('CREDENTIAL_CACHE_MS', '5678');
    expect(settings().credentialCacheMs).toBe(1234);
  });

  it('throws a SettingsError naming the variable when the environment holds a bad value', () => {
    vi.stubEnv('CREDENTIAL_CACHE_MS', 'abc');
    useSettings();
    expect(() => settings()).toThrow(SettingsError);
    expect(() => settings()).toThrow(/CREDENTIAL_CACHE_MS="abc": must be a whole number/);
  });

  it('replaces some settings with useSettings(overrides), and useSettings() rereads the environment', () => {
    vi.stubEnv('CREDENTIAL_CACHE_MS', '1234');
    vi.stubEnv('MODEL_ROUTES_CACHE_MS', '50');
    useSettings();
    const fromEnv = settings();
    useSettings({ credentialCacheMs: 100, logLevel: 'debug' });
    expect(settings()).toStrictEqual({ ...fromEnv, credentialCacheMs: 100, logLevel: 'debug' });
    expect(settings().modelRoutesCacheMs).toBe(50); // the others are kept

    vi.stubEnv('CREDENTIAL_CACHE_MS', '4321');
    expect(settings().credentialCacheMs).toBe(100); // an override holds until reset
    useSettings();
    expect(settings()).toStrictEqual(loadSettings(process.env));
    expect(settings().credentialCacheMs).toBe(4321);
    expect(settings().logLevel).toBe(fromEnv.logLevel);
  });
});

describe('ENV', () => {
  it('names the variable of each definition, one distinct variable per setting', () => {
    expect(Object.keys(ENV)).toEqual(Object.keys(DEFINITIONS));
    for (const [key, definition] of Object.entries(DEFINITIONS)) expect(ENV[key as keyof typeof ENV]).toBe(definition.env);
    const names = Object.values(ENV);
    expect(new Set(names).size).toBe(names.length);
    for (const name of names) expect(name).toMatch(/^[A-Z][A-Z0-9_]*$/);
    // Each name is the one loadSettings reads: a bad value under it is reported under it.
    for (const [key, name] of Object.entries(ENV)) {
      if (['dataDir', 'tableName', 'bucketName', 'connectionsTable', 'cdkDefaultAccount', 'cdkDefaultRegion', 'ffmpegPath'].includes(key)) continue; // any non-empty text is valid
      expect(reported(errorFor({ [name]: '{not valid' }).message)).toEqual([name]);
    }
  });
});

describe('one module', () => {
  it('is the only place in lambdas/, bin/ and lib/ that reads process.env', () => {
    const files = (dir: string): string[] =>
      readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? files(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : []));
    const reads = ['lambdas', 'bin', 'lib']
      .flatMap((dir) => files(join(ROOT, dir)))
      .map((file) => relative(ROOT, file).split('\\').join('/'))
      .filter((file) => file !== 'lambdas/shared/settings.ts')
      .flatMap((file) =>
        readFileSync(join(ROOT, file), 'utf8')
          .split('\n')
          .flatMap((line, i) => (/\bprocess\s*(\.\s*env\b|\[\s*['"`]env['"`]\s*\])|\bfrom\s+['"](node:)?process['"]/.test(line) ? [`${file}:${i + 1}: ${line.trim()}`] : [])),
      );
    expect(reads).toEqual([]);
  });
});

describe('docs/settings.md', () => {
  const path = join(ROOT, 'docs', 'settings.md');
  const SECTION = /(<!-- settings-table:start[^\n]*-->\n)([\s\S]*?)(<!-- settings-table:end -->)/;

  it('holds the table of settingsTable(), one row per definition (UPDATE_SETTINGS_DOC=1 rewrites it)', () => {
    let doc = readFileSync(path, 'utf8');
    expect(doc).toMatch(SECTION);
    if (process.env.UPDATE_SETTINGS_DOC === '1') {
      doc = doc.replace(SECTION, (_, start: string, _table: string, end: string) => `${start}${settingsTable()}\n${end}`);
      writeFileSync(path, doc);
    }
    expect(SECTION.exec(doc)![2]).toBe(`${settingsTable()}\n`);
    const rows = settingsTable().split('\n').slice(2);
    expect(rows.map((row) => /^\| `([A-Z0-9_]+)` \|/.exec(row)?.[1])).toEqual(Object.values(DEFINITIONS).map((d) => d.env));
  });
});
