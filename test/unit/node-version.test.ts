/**
 * The Node.js version the project says it needs is the one it runs on (docs/decisions/node-version.md):
 * README's quickstart, package.json's `engines` and every installed package's own `engines` agree with
 * the Node running the tests (CI's). `.npmrc` sets engine-strict, so `npm ci` refuses a dependency that
 * declares a newer Node instead of warning EBADENGINE and running it anyway.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import semver from 'semver';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..', '..');
const read = (file: string) => readFileSync(join(ROOT, file), 'utf8');
const pkg = JSON.parse(read('package.json'));
const lock = JSON.parse(read('package-lock.json')) as { packages: Record<string, { engines?: { node?: string } | string[]; optional?: boolean }> };

describe('the Node.js version', () => {
  it("package.json's engines admit the Node running the tests, and its floor is the README's", () => {
    expect(semver.satisfies(process.version, pkg.engines.node)).toBe(true);
    const min = semver.minVersion(pkg.engines.node)!;
    const floor = `${min.major}.${min.minor}`;
    expect(read('README.md')).toContain(`with Node.js ${floor} or newer`);
    expect(read('docs/deploying.md')).toContain(`Node.js ${floor} or newer`);
  });

  it('every locked package admits that floor and the Node running the tests', () => {
    const floor = semver.minVersion(pkg.engines.node)!.version;
    const refusing: string[] = [];
    for (const [path, meta] of Object.entries(lock.packages)) {
      const range = !Array.isArray(meta.engines) ? meta.engines?.node : undefined;
      if (!path || !range || meta.optional) continue;
      if (!semver.satisfies(process.version, range) || !semver.satisfies(floor, range)) refusing.push(`${path} (node ${range})`);
    }
    expect(refusing).toEqual([]);
  });

  it('npm refuses a dependency that declares a Node it does not run on', () => {
    expect(read('.npmrc')).toMatch(/^engine-strict=true$/m);
  });
});
