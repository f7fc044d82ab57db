/**
 * Invitations into an organization (issue 37; docs/decisions/console-people.md). The token is 32
 * random bytes (base64url), handed out once in the invitation's URL (`<console>/invite#<token>`: in the
 * fragment, which no browser sends in a request or a Referer) and stored only as its SHA-256:
 *   inv#<sha256> / inv      {id, organization_id, email, role, created_by, created_ms, expires_ms, used_ms}
 *                           (gsi1: org#<org> / inv#<id>, to list them); kept 30 days past its expiry so a
 *                           late click hears `410 invitation_expired` rather than `404`
 *   invid#<id> / invid      {hash}: from the id to the invitation, to revoke by id
 * Single use: the accept creates the person in one transaction with the invitation's `used_ms: null`
 * condition, so of two accepts at once exactly one wins (the other hears `409 invitation_used`).
 */
import { hash, randomBytes } from 'node:crypto';
import type { KeyValueStore, KvItem } from '../engine/ports.js';
import { TransactionCanceledError } from '../engine/errors.js';
import { PlatformError } from '../shared/errors.js';
import { settings } from '../shared/settings.js';
import { newId } from '../shared/ids.js';
import { listPage, Tenants, type ListOptions, type ListPage, type Organization } from '../auth/tenants.js';
import { requireManageable, roleOf, type Role } from './roles.js';
import { normalEmail, People, type Person } from './people.js';
import { checkNewPassword, hashPassword } from './passwords.js';

export const DEFAULT_INVITATION_MS = 7 * 24 * 3600_000;
export const MAX_INVITATION_MS = 30 * 24 * 3600_000;
/** How long a used or expired invitation is kept, to answer 409 / 410 instead of 404. */
const KEPT_AFTER_MS = 30 * 24 * 3600_000;
const TOKEN = /^[A-Za-z0-9_-]{43}$/;

export interface Invitation {
  id: string;
  organization_id: string;
  email: string;
  role: Role;
  /** The person who invited, or `admin` for the admin CLI (or the first start's bootstrap). */
  created_by: string;
  created_at: string;
  expires_at: string;
  /** When it was accepted; null while open. */
  used_at: string | null;
}

const tokenHash = (token: string) => hash('sha256', token, 'hex');
const iso = (ms: number) => new Date(ms).toISOString();
const invitationKey = (hashHex: string) => ({ pk: `inv#${hashHex}`, sk: 'inv' });
const pointerKey = (id: string) => ({ pk: `invid#${id}`, sk: 'invid' });

const view = (item: KvItem): Invitation => ({
  id: String(item.id),
  organization_id: String(item.organization_id),
  email: String(item.email),
  role: item.role as Role,
  created_by: String(item.created_by),
  created_at: iso(Number(item.created_ms)),
  expires_at: iso(Number(item.expires_ms)),
  used_at: item.used_ms === null || item.used_ms === undefined ? null : iso(Number(item.used_ms)),
});

export const invitationNotFound = () => new PlatformError('invitation_not_found', 'No such invitation; ask for a new one.');
const invitationUsed = () => new PlatformError('invitation_used', 'This invitation was used already; sign in, or ask for a new one.');
const EMAIL_TAKEN = 'This email already belongs to a person of an organization; one email belongs to one organization.';

/** The console's address as configured: CONSOLE_URL, else the local server's on CONSOLE_PORT. */
export const configuredConsoleUrl = (): string => (settings().consoleUrl ?? `http://127.0.0.1:${settings().consolePort}`).replace(/\/+$/, '');

/** `<console>/invite#<token>`: the token in the fragment, never sent to a server by the browser. */
export const invitationUrl = (consoleUrl: string, token: string) => `${consoleUrl.replace(/\/+$/, '')}/invite#${token}`;

/**
 * `7d`, `12h`, `30m` (or plain hours as a number) to milliseconds, from 1 minute to 30 days; else
 * 400 invalid_body naming `param`.
 */
export function expiryOf(text: string | number, param = 'expires_in'): number {
  const match = typeof text === 'number' ? [String(text), String(text), 'h'] : /^(\d{1,6})([dhm])$/.exec(text.trim());
  const ms = match && Number.isSafeInteger(Number(match[1])) ? Number(match[1]) * { d: 86_400_000, h: 3_600_000, m: 60_000 }[match[2] as 'd' | 'h' | 'm'] : NaN;
  if (!(ms >= 60_000 && ms <= MAX_INVITATION_MS)) {
    throw new PlatformError('invalid_body', `An invitation lasts from 1 minute to 30 days (\`7d\`, \`12h\`, \`30m\`).`, param);
  }
  return ms;
}

export class Invitations {
  private readonly people: People;
  private readonly tenants: Tenants;

  constructor(private readonly kv: KeyValueStore, private readonly now: () => number) {
    this.people = new People(kv, now);
    this.tenants = new Tenants(kv, now);
  }

  /**
   * Invites `email` into the organization with `role`; the token is returned this once. `inviter`: the
   * person inviting (who may invite up to their own role), or undefined for the operator's admin CLI.
   * An email that is already a person's (of any organization: one email, one organization) is
   * `409 already_exists`.
   */
  async create(input: { organizationId: string; email: unknown; role: unknown; expiresInMs?: number; inviter?: { id: string; role: Role } }): Promise<{ invitation: Invitation; token: string }> {
    const email = normalEmail(input.email);
    const role = roleOf(input.role);
    if (input.inviter) requireManageable(input.inviter.role, role);
    const org = await this.tenants.getOrganization(input.organizationId);
    if (!org) throw new PlatformError('not_found', `No organization ${input.organizationId}.`);
    const owner = await this.people.emailOwner(email);
    if (owner) {
      throw new PlatformError(
        'already_exists',
        owner.organization_id === org.id ? 'This email is already a person of the organization.' : EMAIL_TAKEN,
        'email',
      );
    }
    const now = this.now();
    const expiresMs = now + (input.expiresInMs ?? DEFAULT_INVITATION_MS);
    const token = randomBytes(32).toString('base64url');
    const hashHex = tokenHash(token);
    const id = newId('inv', now);
    const item = {
      ...invitationKey(hashHex),
      gsi1pk: `org#${org.id}`,
      gsi1sk: `inv#${id}`,
      id,
      organization_id: org.id,
      email,
      role,
      created_by: input.inviter?.id ?? 'admin',
      created_ms: now,
      expires_ms: expiresMs,
      used_ms: null,
      expires_at: Math.ceil((expiresMs + KEPT_AFTER_MS) / 1000),
    };
    await this.kv.transact([
      { put: item, condition: { ifAbsent: true } },
      { put: { ...pointerKey(id), hash: hashHex, expires_at: item.expires_at }, condition: { ifAbsent: true } },
    ]);
    return { invitation: view(item), token };
  }

  /** The open invitation of a token, with its organization; 404 / 409 / 410 as the invitation stands. */
  async read(token: string): Promise<{ invitation: Invitation; organization: Organization; hash: string }> {
    if (!TOKEN.test(token)) throw invitationNotFound();
    const hashHex = tokenHash(token);
    const item = await this.kv.get(invitationKey(hashHex));
    if (!item) throw invitationNotFound();
    const invitation = view(item);
    if (item.used_ms !== null && item.used_ms !== undefined) throw invitationUsed();
    if (Number(item.expires_ms) <= this.now()) throw new PlatformError('invitation_expired', 'This invitation has expired; ask for a new one.');
    const organization = await this.tenants.getOrganization(invitation.organization_id);
    if (!organization) throw invitationNotFound();
    if (organization.disabled) throw new PlatformError('organization_disabled', 'The organization is disabled.');
    return { invitation, organization, hash: hashHex };
  }

  /**
   * Accepts: the person is created with the password (400 weak_password as passwords.ts says), the
   * invitation marked used, in one transaction conditioned on it still being open.
   */
  async accept(token: string, password: unknown): Promise<Person> {
    const { invitation, hash: hashHex } = await this.read(token);
    const checked = await checkNewPassword(password);
    const passwordHash = await hashPassword(checked);
    const { person, writes } = this.people.creation(invitation.organization_id, invitation.email, invitation.role, passwordHash);
    const now = this.now();
    try {
      await this.kv.transact([
        { update: invitationKey(hashHex), set: { used_ms: now, used_by: person.id }, condition: { ifEquals: { used_ms: null } } },
        ...writes,
      ]);
    } catch (error) {
      if (!(error instanceof TransactionCanceledError)) throw error;
      if (error.failed.includes(0)) throw invitationUsed();
      throw new PlatformError('already_exists', EMAIL_TAKEN, 'email');
    }
    return person;
  }

  /** The organization's invitations, oldest first (never a token). */
  list(organizationId: string, options: ListOptions = {}): Promise<ListPage<Invitation>> {
    return listPage(this.kv, { index: 'gsi1', pk: `org#${organizationId}`, sk: { beginsWith: 'inv#' } }, options, () => true, view);
  }

  /** Withdraws an invitation of the organization (its link then answers 404); 404 invitation_not_found otherwise. */
  async revoke(organizationId: string, id: string, inviter?: { role: Role }): Promise<Invitation> {
    const pointer = await this.kv.get(pointerKey(id));
    const item = pointer && (await this.kv.get(invitationKey(String(pointer.hash))));
    if (!item || item.organization_id !== organizationId) throw invitationNotFound();
    const invitation = view(item);
    if (inviter) requireManageable(inviter.role, invitation.role);
    await this.kv.transact([{ delete: invitationKey(String(pointer!.hash)) }, { delete: pointerKey(id) }]);
    return invitation;
  }
}
