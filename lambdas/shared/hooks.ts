/**
 * A typed registry of after-commit hooks, in the manner of PocketBase's model hooks: a service fires an
 * event once its write has committed, and every handler bound to that event's type (or to `*`) runs.
 * A handler cannot undo the write, so its failure is logged and never reaches the caller.
 */
import { log } from './log.js';

export type HookHandler<E, C> = (event: E, context: C) => void | Promise<void>;

export class Hooks<E extends { type: string }, C> {
  private readonly handlers = new Map<string, HookHandler<E, C>[]>();

  constructor(private readonly name: string) {}

  /** Binds a handler to one event type, or to every type with `*`; returns its unbinding. */
  on<T extends E['type']>(type: T | '*', handler: HookHandler<Extract<E, { type: T }>, C>): () => void {
    const list = this.handlers.get(type) ?? [];
    list.push(handler as HookHandler<E, C>);
    this.handlers.set(type, list);
    return () => {
      const at = list.indexOf(handler as HookHandler<E, C>);
      if (at >= 0) list.splice(at, 1);
    };
  }

  /** Runs the handlers of an event that has committed; resolves when they are done, never rejects. */
  async fire(event: E, context: C): Promise<void> {
    const own = this.handlers.get(event.type);
    const all = this.handlers.get('*');
    if (!own?.length && !all?.length) return;
    const run = async (handler: HookHandler<E, C>) => {
      try {
        await handler(event, context);
      } catch (error) {
        log.error(`${this.name} hook failed`, { type: event.type, error: String(error) });
      }
    };
    await Promise.all([...(own ?? []), ...(all ?? [])].map(run));
  }
}
