/**
 * Rate limits are sliding estimates over minute windows (docs/decisions/rate-limits.md): a burst that
 * crosses a minute's end may take a few more calls (the new window's share). Tests asserting exact
 * counts start their burst with enough of the minute left.
 */
export async function awayFromMinuteEnd(seconds: number): Promise<void> {
  const left = 60_000 - (Date.now() % 60_000);
  if (left < seconds * 1000) await new Promise((r) => setTimeout(r, left + 200));
}
