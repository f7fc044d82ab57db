/**
 * The code as it was before issue 32, for the isolation benchmark's throughput baseline: a detached
 * git worktree of that commit in a temp dir, this checkout's node_modules linked into it (the
 * dependencies did not change), removed again after (never committed: `git worktree remove`, then
 * `git worktree prune` for a dir already gone).
 */
import { execFileSync } from 'node:child_process';
import { symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { makeTempDir, ROOT } from './processes.js';

/** The last commit before issue 32's work began. */
export const BASELINE_COMMIT = 'b79c548';

export interface Worktree {
  path: string;
  commit: string;
  remove(): void;
}

const git = (...args: string[]) => execFileSync('git', args, { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();

export function addWorktree(commit = BASELINE_COMMIT): Worktree {
  const temp = makeTempDir('bench-isolation-baseline-');
  const path = join(temp.path, 'tree');
  git('worktree', 'add', '--detach', path, commit);
  symlinkSync(join(ROOT, 'node_modules'), join(path, 'node_modules'));
  let removed = false;
  const remove = () => {
    if (removed) return;
    removed = true;
    try {
      git('worktree', 'remove', '--force', path);
    } catch {
      // removed by hand, or half made: the prune below forgets it
    }
    temp.remove();
    try {
      git('worktree', 'prune');
    } catch {
      // nothing to prune
    }
  };
  // The bench may end by a throw or Ctrl-C: the tree goes with the temp dir, its record with the prune.
  process.once('exit', remove);
  return { path, commit: git('rev-parse', '--short', commit), remove };
}
