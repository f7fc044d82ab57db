/**
 * A cheap in-process wake-up for open streams (docs/events/stream.md): publish() calls inboxWritten()
 * once it committed messages to a subscription's inbox, and a stream of that subscription held by
 * this process pulls at once instead of at its next poll. Only a hint: a write made by another process
 * (another local worker, another Lambda instance) is found by the stream's regular poll.
 */
type Listener = () => void;

const listeners = new Map<string, Set<Listener>>();

/** Calls `listener` whenever this process writes to the subscription's inbox; returns the unsubscribe. */
export function onInboxWritten(subscriptionId: string, listener: Listener): () => void {
  let set = listeners.get(subscriptionId);
  if (!set) listeners.set(subscriptionId, (set = new Set()));
  set.add(listener);
  return () => {
    set!.delete(listener);
    if (!set!.size && listeners.get(subscriptionId) === set) listeners.delete(subscriptionId);
  };
}

export function inboxWritten(subscriptionId: string): void {
  const set = listeners.get(subscriptionId);
  if (set) for (const listener of set) listener();
}
