/**
 * The admin CLI's help, generated from its command definitions (and the README's table with it),
 * and its errors as an operator meets them: readable, never a stack trace, a warning before it
 * writes to a store no running server uses.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inject } from 'vitest';
import { COMMANDS } from '../../lambdas/admin/cli.js';
import { commandsTable, usageLine } from '../../lambdas/admin/command.js';

const ROOT = join(import.meta.dirname, '..', '..');
const dirs: string[] = [];
const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), 'admin-help-'));
  dirs.push(dir);
  return dir;
};
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

/** The CLI as a user runs it, in `cwd`, with only `env` over a clean environment. */
function cli(cwd: string, env: Record<string, string>, ...args: string[]) {
  const { DATA_DIR: _d, ENGINE: _e, TABLE_NAME: _t, ...rest } = process.env;
  const r = spawnSync(process.execPath, [inject('adminCli'), ...args], { cwd, env: { ...rest, ...env }, encoding: 'utf8', timeout: 60_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}
const noStack = (text: string) => expect(text).not.toMatch(/\n\s+at /);

describe('admin --help', () => {
  it('lists every command with its usage line on stdout, exit 0, opening no store', () => {
    const dir = tempDir();
    const store = join(dir, 'store');
    for (const args of [['--help'], ['-h'], ['help']]) {
      const r = cli(dir, { DATA_DIR: store }, ...args);
      expect(r.status, r.stderr).toBe(0);
      expect(r.stderr).toBe('');
      for (const [name, c] of Object.entries(COMMANDS)) expect(r.stdout).toContain(`  ${usageLine(name, c)}\n`);
    }
    // A group's commands only.
    const keys = cli(dir, { DATA_DIR: store }, 'key', '--help');
    expect(keys.status).toBe(0);
    expect(keys.stdout).toContain('key create --org ID');
    expect(keys.stdout).not.toContain('org create');
    expect(existsSync(store)).toBe(false);
  });

  it('`key create --help` shows its usage, what it prints and each option, opening no store', () => {
    const dir = tempDir();
    const store = join(dir, 'store');
    const r = cli(dir, { DATA_DIR: store }, 'key', 'create', '--help');
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain('usage: npm run --silent admin -- key create --org ID [--app ID] [--permissions a,b]\n');
    expect(r.stdout).toContain('the secret key aik_… is shown this once');
    expect(r.stdout).toMatch(/\n {2}--org ID +\(required\)\n/);
    expect(r.stdout).toMatch(/\n {2}--permissions a,b +narrows it on the Events API/);
    expect(r.stdout).toMatch(/\n {2}-h, --help +this help/);
    expect(existsSync(store)).toBe(false);
    // --help anywhere after the command, even beside a wrong option, is help.
    expect(cli(dir, { DATA_DIR: store }, 'key', 'create', '--bogus', '--help').stdout).toBe(r.stdout);
  });

  it('refuses an unknown command by naming what there is (exit 2)', () => {
    const dir = tempDir();
    const cases: [string[], RegExp][] = [
      [['key', 'nope'], /^unknown command "key nope"; key commands: create, list, disable, enable, limits, routes$/],
      [['key', 'nope', '--help'], /^unknown command "key nope"; key commands: create/],
      [['nope'], /^unknown command "nope"; npm run --silent admin -- --help lists them$/],
      [[], /^a command is needed: npm run --silent admin -- --help lists them$/],
      [['key', 'routes', '--key-id', 'k', '--all', '--routes', 'a'], /^give either --routes or --all\nusage: key routes --key-id ID \(--routes a,b \| --all\)/],
    ];
    for (const [args, message] of cases) {
      const r = cli(dir, { DATA_DIR: dir }, ...args);
      expect(r.status, args.join(' ')).toBe(2);
      expect(r.stdout).toBe('');
      expect(JSON.parse(r.stderr).error).toMatch(message);
    }
  });
});

describe('README admin table', () => {
  const path = join(ROOT, 'README.md');
  const SECTION = /(<!-- admin-table:start[^\n]*-->\n)([\s\S]*?)(<!-- admin-table:end -->)/;

  it('is the table the command definitions generate, one row per command (UPDATE_ADMIN_DOC=1 rewrites it)', () => {
    let doc = readFileSync(path, 'utf8');
    expect(doc).toMatch(SECTION);
    if (process.env.UPDATE_ADMIN_DOC === '1') {
      doc = doc.replace(SECTION, (_, start: string, _table: string, end: string) => `${start}${commandsTable(COMMANDS)}\n${end}`);
      writeFileSync(path, doc);
    }
    expect(SECTION.exec(doc)![2]).toBe(`${commandsTable(COMMANDS)}\n`);
    const commands = SECTION.exec(doc)![2].split('\n').slice(2, -1).map((row) => /^\| `([a-z-]+ [a-z-]+)/.exec(row)?.[1]);
    expect(commands).toEqual(Object.keys(COMMANDS));
  });
});

describe('admin errors', () => {
  it('ENGINE=aws without TABLE_NAME: the variable named, exit 1, no stack trace', () => {
    const dir = tempDir();
    const r = cli(dir, { ENGINE: 'aws' }, 'org', 'create', '--name', 'x');
    expect(r.status).toBe(1);
    expect(r.stdout).toBe('');
    noStack(r.stderr);
    expect(JSON.parse(r.stderr)).toEqual({ error: expect.stringMatching(/^ENGINE=aws: TABLE_NAME must be set/) });
  });

  it('an unexpected failure (AWS unreachable) is its kind and message with what to check, no stack trace', () => {
    const dir = tempDir();
    const unreachable = { ENGINE: 'aws', TABLE_NAME: 'nowhere', AWS_REGION: 'us-east-1', AWS_ACCESS_KEY_ID: 'x', AWS_SECRET_ACCESS_KEY: 'x', AWS_ENDPOINT_URL: 'http://127.0.0.1:1', AWS_MAX_ATTEMPTS: '1' };
    const r = cli(dir, unreachable, 'org', 'create', '--name', 'x');
    expect(r.status).toBe(1);
    expect(r.stdout).toBe('');
    noStack(r.stderr);
    const lines = r.stderr.trim().split('\n').filter((l) => l.startsWith('{'));
    expect(JSON.parse(lines.at(-1)!).error).toMatch(/ECONNREFUSED.*check TABLE_NAME, AWS_REGION, the credentials and AWS_ENDPOINT_URL/);
    // The stack only on request, as a field of the same document.
    const debug = cli(dir, { ...unreachable, LOG_LEVEL: 'debug' }, 'org', 'create', '--name', 'x');
    const last = JSON.parse(debug.stderr.trim().split('\n').filter((l) => l.startsWith('{')).at(-1)!);
    expect(last).toEqual({ error: expect.stringMatching(/ECONNREFUSED/), stack: expect.stringMatching(/\n\s+at /) });
  });

  it('warns on stderr, naming the folder, when it creates a store no running server uses; not when the store is there', () => {
    const dir = tempDir();
    const created = cli(dir, {}, 'org', 'create', '--name', 'Here');
    expect(created.status, created.stderr).toBe(0);
    expect(JSON.parse(created.stdout)).toMatchObject({ name: 'Here' });
    expect(JSON.parse(created.stderr)).toEqual({ warning: expect.stringContaining(`no store at ${join(dir, '.platform')}: creating a new one there`) });
    // The same folder again (as npm start left it), or DATA_DIR naming an existing store: no warning.
    expect(cli(dir, {}, 'org', 'create', '--name', 'Again').stderr).toBe('');
    expect(cli(tempDir(), { DATA_DIR: join(dir, '.platform') }, 'org', 'create', '--name', 'There').stderr).toBe('');
  });
});
