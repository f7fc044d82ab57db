/**
 * Console sessions (docs/decisions/console-sessions.md). A session is a random token (32 bytes,
 * base64url) in the HttpOnly cookie `session`, stored only as its SHA-256:
 *   ses#<sha256> / ses   {person_id, organization_id, csrf_token, created_ms, seen_ms, absolute_ms}
 *                        (gsi1: per#<person> / ses#<sha256>, to end a person's sessions);
 *                        the store drops it at its absolute end (expires_at)
 * It ends 12 hours after its last use (idle) and 7 days after sign-in (absolute), at sign-out, and when
 * its person is removed or its organization disabled. Every sign-in makes a new one (no fixation): the
 * session the browser held before is ended.
 *
 * The session item is read on every request (one consistent read), so a sign-out or a removal ends it at
 * once everywhere; its person and organization are cached per process for at most CREDENTIAL_CACHE_MS
 * (a minute at most), so a role change or a disabled organization applies within that time.
 */
import { hash, randomBytes } from 'node:crypto';
import type { KeyValueStore, KvItem } from '../engine/ports.js';
import { ConditionFailedError } from '../engine/errors.js';
import { TtlCache } from '../shared/ttl-cache.js';
import { Tenants, type Organization } from '../auth/tenants.js';
import { People, type Person } from './people.js';

export const SESSION_IDLE_MS = 12 * 3600_000;
export const SESSION_ABSOLUTE_MS = 7 * 24 * 3600_000;
/** A session's last use is written at most this often (a write per request would double the console's writes). */
export const SESSION_TOUCH_MS = 5 * 60_000;

export const sessionHash = (token: string) => hash('sha256', token, 'hex');
const sessionKey = (hashHex: string) => ({ pk: `ses#${hashHex}`, sk: 'ses' });
const TOKEN = /^[A-Za-z0-9_-]{43}$/;

export interface NewSession {
  token: string;
  csrfToken: string;
  /** Unix ms of the absolute end: the cookies' lifetime. */
  absoluteMs: number;
}

export interface ResolvedSession {
  hash: string;
  csrfToken: string;
  person: Person;
  organization: Organization;
  absoluteMs: number;
}

/** Why a session that exists may not be used. */
export type SessionRefusal = 'organization_disabled';

/** People and organizations by id, per process, for at most the credential cache's time. */
const people = new TtlCache<Person | null>();
const organizations = new TtlCache<Organization | null>();

export class Sessions {
  constructor(private readonly kv: KeyValueStore, private readonly now: () => number, private readonly cacheMs: number = 30_000) {}

  /**
   * A new session for `person`; `previousToken`, the session the browser sent (if any), is ended: a
   * sign-in never keeps a session id the browser had before.
   */
  async create(person: Person, previousToken?: string): Promise<NewSession> {
    if (previousToken) await this.end(previousToken);
    const now = this.now();
    const token = randomBytes(32).toString('base64url');
    const csrfToken = randomBytes(32).toString('base64url');
    const hashHex = sessionHash(token);
    const absoluteMs = now + SESSION_ABSOLUTE_MS;
    await this.kv.put(
      {
        ...sessionKey(hashHex),
        gsi1pk: `per#${person.id}`,
        gsi1sk: `ses#${hashHex}`,
        person_id: person.id,
        organization_id: person.organization_id,
        csrf_token: csrfToken,
        created_ms: now,
        seen_ms: now,
        absolute_ms: absoluteMs,
        expires_at: Math.ceil(absoluteMs / 1000),
      },
      { ifAbsent: true },
    );
    return { token, csrfToken, absoluteMs };
  }

  /**
   * The live session of a token with its person and organization; undefined when unknown, ended,
   * idle past 12 hours, past its 7 days, or its person removed. A disabled organization's session is
   * ended here and reported as refused.
   */
  async resolve(token: string): Promise<ResolvedSession | SessionRefusal | undefined> {
    if (!TOKEN.test(token)) return undefined;
    const hashHex = sessionHash(token);
    const item = await this.kv.get(sessionKey(hashHex));
    if (!item) return undefined;
    const now = this.now();
    const absoluteMs = Number(item.absolute_ms);
    const seenMs = Number(item.seen_ms);
    if (now >= absoluteMs || now >= seenMs + SESSION_IDLE_MS) {
      await this.kv.delete(sessionKey(hashHex)).catch(() => undefined);
      return undefined;
    }
    const [person, organization] = await Promise.all([this.person(String(item.person_id), now), this.organization(String(item.organization_id), now)]);
    // A removed person (or one moved away, which this design never does) has no session any more.
    if (!person || person.organization_id !== item.organization_id || !organization) {
      await this.kv.delete(sessionKey(hashHex)).catch(() => undefined);
      return undefined;
    }
    if (organization.disabled) {
      await this.kv.delete(sessionKey(hashHex)).catch(() => undefined);
      return 'organization_disabled';
    }
    if (now - seenMs >= SESSION_TOUCH_MS) await this.touch(hashHex, now);
    return { hash: hashHex, csrfToken: String(item.csrf_token), person, organization, absoluteMs };
  }

  /** Ends the session of a token (sign-out); an unknown one is no error. */
  async end(token: string): Promise<void> {
    if (!TOKEN.test(token)) return;
    await this.kv.delete(sessionKey(sessionHash(token)));
  }

  /** Ends every session of a person (removed): each is refused from the next request on. */
  async endAllFor(personId: string): Promise<number> {
    let ended = 0;
    let cursor: string | undefined;
    do {
      const page = await this.kv.query({ index: 'gsi1', pk: `per#${personId}`, sk: { beginsWith: 'ses#' }, limit: 100, cursor });
      await Promise.all(page.items.map((item: KvItem) => this.kv.delete({ pk: item.pk, sk: item.sk })));
      ended += page.items.length;
      cursor = page.cursor;
    } while (cursor);
    people.delete(personId);
    return ended;
  }

  /** Drops this process's cached person, so a change made here applies here at once. */
  static forget(personId: string): void {
    people.delete(personId);
  }

  private async touch(hashHex: string, now: number): Promise<void> {
    // Only while it exists: an update creates a missing item, and a touch must not bring back an ended session.
    await this.kv.update({ key: sessionKey(hashHex), set: { seen_ms: now }, condition: { ifExists: true } }).catch((error: unknown) => {
      if (!(error instanceof ConditionFailedError)) throw error;
    });
  }

  private person(id: string, now: number): Promise<Person | null> {
    return people.getOrLoad(id, now, this.cacheMs, async () => (await new People(this.kv, this.now).get(id)) ?? null);
  }

  private organization(id: string, now: number): Promise<Organization | null> {
    return organizations.getOrLoad(id, now, this.cacheMs, async () => (await new Tenants(this.kv, this.now).getOrganization(id)) ?? null);
  }
}
