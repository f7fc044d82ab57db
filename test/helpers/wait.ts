/** Polls `probe` until it holds, or fails naming `what` after `timeoutMs` (tests wait on other processes). */
export async function waitFor(what: string, probe: () => boolean | Promise<boolean>, timeoutMs: number, everyMs = 20): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
