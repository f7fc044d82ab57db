/**
 * The people of an organization who use the console (docs/decisions/console-people.md). Storage
 * (the one table):
 *   per#<id> / per          person {id, organization_id, email, role, password_hash, created_at}
 *                           (gsi1: org#<org> / per#<id>, to list an organization's people)
 *   email#<email> / email   the email's one owner {person_id, organization_id}: one email belongs to one
 *                           person of one organization, guarded in the same transaction that creates the
 *                           person, so two accepts cannot both take an email
 *   org#<id> / owners       {count}: the organization's owners, so the last one is never removed nor demoted
 * Emails are kept trimmed and lower-cased (what a person types at sign-in is compared so).
 */
import type { KeyValueStore, KvItem, KvWrite } from '../engine/ports.js';
import { ConditionFailedError, TransactionCanceledError } from '../engine/errors.js';
import { PlatformError } from '../shared/errors.js';
import { newId } from '../shared/ids.js';
import { listPage, type ListOptions, type ListPage } from '../auth/tenants.js';
import { organizationWidePrincipal, type Principal } from '../auth/principal.js';
import { requireManageable, roleOf, type Role } from './roles.js';

export interface Person {
  id: string;
  organization_id: string;
  email: string;
  role: Role;
  created_at: string;
}
interface StoredPerson extends Person {
  password_hash: string;
}
/** Who acts, as the console's principal names them. */
export interface Actor {
  id: string;
  organizationId: string;
  role: Role;
}

const MAX_EMAIL = 254;
const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

/** The email as stored and compared: trimmed, lower-cased; 400 invalid_body `email` when it is not one. */
export function normalEmail(email: unknown): string {
  const value = typeof email === 'string' ? email.trim().toLowerCase() : '';
  if (!value || value.length > MAX_EMAIL || !EMAIL.test(value)) throw new PlatformError('invalid_body', '`email` must be an email address.', 'email');
  return value;
}

export const personKey = (id: string) => ({ pk: `per#${id}`, sk: 'per' });
export const emailKey = (email: string) => ({ pk: `email#${email}`, sk: 'email' });
const ownersKey = (organizationId: string) => ({ pk: `org#${organizationId}`, sk: 'owners' });

const view = (item: KvItem): Person => ({
  id: String(item.id),
  organization_id: String(item.organization_id),
  email: String(item.email),
  role: item.role as Role,
  created_at: String(item.created_at),
});

/** A person as the platform's caller (kind `person`): organization-wide, the person's id as credential id. */
export const personPrincipal = (person: Person): Principal => ({
  ...organizationWidePrincipal('person', person.id, person.organization_id),
  person: { id: person.id, email: person.email, role: person.role },
});

export const personNotFound = () => new PlatformError('person_not_found', 'No person of that id in this organization.');

export class People {
  constructor(private readonly kv: KeyValueStore, private readonly now: () => number) {}

  async get(id: string): Promise<Person | undefined> {
    const item = await this.kv.get(personKey(id));
    return item && view(item);
  }

  /** The person and their password hash, by email (the sign-in's look-up). */
  async findForSignIn(email: string): Promise<(Person & { password_hash: string }) | undefined> {
    const owner = await this.kv.get(emailKey(email));
    if (!owner) return undefined;
    const item = await this.kv.get(personKey(String(owner.person_id)));
    return item && { ...view(item), password_hash: String(item.password_hash) };
  }

  /** The organization of the email's person, if the email is taken. */
  async emailOwner(email: string): Promise<{ person_id: string; organization_id: string } | undefined> {
    const item = await this.kv.get(emailKey(email));
    return item && { person_id: String(item.person_id), organization_id: String(item.organization_id) };
  }

  /** The organization's people, oldest first (never a password hash). */
  list(organizationId: string, options: ListOptions = {}): Promise<ListPage<Person>> {
    return listPage(this.kv, { index: 'gsi1', pk: `org#${organizationId}`, sk: { beginsWith: 'per#' } }, options, () => true, view);
  }

  /**
   * The writes that create a person (an invitation's accept adds its own beside them): the person, the
   * email's guard, and the owners' count for an owner.
   */
  creation(organizationId: string, email: string, role: Role, passwordHash: string): { person: Person; writes: KvWrite[] } {
    const person: Person = { id: newId('per'), organization_id: organizationId, email, role, created_at: new Date(this.now()).toISOString() };
    const stored: StoredPerson = { ...person, password_hash: passwordHash };
    const writes: KvWrite[] = [
      { put: { ...personKey(person.id), gsi1pk: `org#${organizationId}`, gsi1sk: `per#${person.id}`, ...stored }, condition: { ifAbsent: true } },
      { put: { ...emailKey(email), person_id: person.id, organization_id: organizationId }, condition: { ifAbsent: true } },
    ];
    if (role === 'owner') writes.push({ update: ownersKey(organizationId), add: { count: 1 } });
    return { person, writes };
  }

  /** A person of the actor's organization, else 404 person_not_found (another organization's included). */
  private async own(actor: Actor, personId: string): Promise<Person> {
    const person = await this.get(personId);
    if (!person || person.organization_id !== actor.organizationId) throw personNotFound();
    return person;
  }

  /**
   * Changes a person's role. The actor may only give and take away roles up to their own (an admin
   * neither makes nor demotes an owner); the organization keeps at least one owner.
   */
  async setRole(actor: Actor, personId: string, value: unknown): Promise<Person> {
    const role = roleOf(value);
    const person = await this.own(actor, personId);
    requireManageable(actor.role, person.role);
    requireManageable(actor.role, role);
    if (person.role === role) return person;
    const writes: KvWrite[] = [{ update: personKey(person.id), set: { role }, condition: { ifEquals: { role: person.role } } }];
    if (role === 'owner') writes.push({ update: ownersKey(person.organization_id), add: { count: 1 } });
    if (person.role === 'owner') writes.push(await this.lastOwnerGuard(person.organization_id, 'take the owner role from'));
    await this.kv.transact(writes).catch(conflict);
    return { ...person, role };
  }

  /** Removes a person: their email is free again; their sessions end (Sessions.endAllFor, called by the caller). */
  async remove(actor: Actor, personId: string): Promise<Person> {
    const person = await this.own(actor, personId);
    requireManageable(actor.role, person.role);
    const writes: KvWrite[] = [
      { delete: personKey(person.id), condition: { ifEquals: { role: person.role } } },
      { delete: emailKey(person.email) },
    ];
    if (person.role === 'owner') writes.push(await this.lastOwnerGuard(person.organization_id, 'remove'));
    await this.kv.transact(writes).catch(conflict);
    return person;
  }

  /** The owners' count goes down by one, only from the value read (above 1): never to no owner at all. */
  private async lastOwnerGuard(organizationId: string, doing: string): Promise<KvWrite> {
    const count = Number((await this.kv.get(ownersKey(organizationId)))?.count ?? 0);
    if (count <= 1) throw new PlatformError('last_owner', `You cannot ${doing} the organization's last owner; make another person owner first.`);
    return { update: ownersKey(organizationId), add: { count: -1 }, condition: { ifEquals: { count } } };
  }
}

/** A condition that failed meanwhile: another change won the race; the caller reads again and retries. */
function conflict(error: unknown): never {
  if (error instanceof TransactionCanceledError || error instanceof ConditionFailedError) {
    throw new PlatformError('version_conflict', 'The person changed meanwhile; read again and retry.');
  }
  throw error;
}
