/**
 * Passkeys (WebAuthn) of the console's people (docs/decisions/console-passkeys.md), verified by
 * @simplewebauthn/server. A signed-in person adds passkeys (discoverable credentials, user
 * verification required) and signs in with one instead of the password; a passkey sign-in makes a new
 * session exactly as the password's does and counts against the same sign-in limits. Storage (the
 * one table):
 *   pkc#<sha256 of challenge> / pkc   {purpose, person_id?, session_hash?, email?, expires_ms}: a
 *                                     challenge handed out, single use (consumed by a conditioned delete),
 *                                     good for CHALLENGE_MS; the store drops it after
 *   pk#<credential id> / pk           {id, person_id, organization_id, public_key, counter, transports,
 *                                     name, created_ms, last_used_ms, device_type, backed_up}
 *                                     (gsi1: per#<person> / pk#<id>, to list a person's passkeys)
 * A credential id belongs to one person (the put is conditioned on its absence). A passkey whose person
 * was removed is refused (and dropped) at its next use. The relying party (its id, the origins a
 * ceremony may come from) is given by the caller: only the HTTP layer knows the console's address.
 */
import { hash, randomBytes } from 'node:crypto';
import {
  generateAuthenticationOptions,
  generateRegistrationOptions,
  verifyAuthenticationResponse,
  verifyRegistrationResponse,
  type AuthenticationResponseJSON,
  type AuthenticatorTransport,
  type PublicKeyCredentialCreationOptionsJSON,
  type PublicKeyCredentialRequestOptionsJSON,
  type RegistrationResponseJSON,
} from '@simplewebauthn/server';
import type { Engine, KeyValueStore, KvItem } from '../engine/ports.js';
import { ConditionFailedError } from '../engine/errors.js';
import { PlatformError } from '../shared/errors.js';
import { Tenants } from '../auth/tenants.js';
import { normalEmail, People, type Person } from './people.js';
import { SignInLimits } from './sign-in-limits.js';
import { Sessions, type NewSession } from './sessions.js';

/** How long a ceremony's challenge may be answered; the browser's own prompt gives up after CEREMONY_MS. */
export const CHALLENGE_MS = 5 * 60_000;
export const CEREMONY_MS = 2 * 60_000;
/** Passkeys one person may hold: a person has a few devices; an unbounded list would only grow the options. */
export const MAX_PASSKEYS = 20;
export const MAX_NAME = 64;
/** Credential ids are at most 1023 bytes (WebAuthn L3), 1364 characters of base64url. */
const CREDENTIAL_ID = /^[A-Za-z0-9_-]{1,1400}$/;

/** Who the passkeys are for: the console's RP ID (its host name) and the origins its pages are served from. */
export interface RelyingParty {
  id: string;
  name: string;
  origins: string[];
}

export interface Passkey {
  id: string;
  name: string;
  created_at: string;
  last_used_at: string | null;
  transports: string[];
  /** Whether the credential is synced (a multi-device passkey) and backed up, as the authenticator said. */
  backed_up: boolean;
}

type Purpose = 'registration' | 'sign_in';

const challengeKey = (challenge: string) => ({ pk: `pkc#${hash('sha256', challenge, 'hex')}`, sk: 'pkc' });
const passkeyKey = (id: string) => ({ pk: `pk#${id}`, sk: 'pk' });
const iso = (ms: number) => new Date(ms).toISOString();

/** The WebAuthn user handle of a person: their id's bytes (no email, nothing personal). */
const userHandle = (person: Person) => Buffer.from(person.id, 'utf8');

const view = (item: KvItem): Passkey => ({
  id: String(item.id),
  name: String(item.name),
  created_at: iso(Number(item.created_ms)),
  last_used_at: item.last_used_ms === null || item.last_used_ms === undefined ? null : iso(Number(item.last_used_ms)),
  transports: Array.isArray(item.transports) ? item.transports.map(String) : [],
  backed_up: item.backed_up === true,
});

export const passkeyFailed = (why: string) => new PlatformError('passkey_failed', `The passkey could not be verified: ${why}`, 'response');
export const passkeyNotFound = () => new PlatformError('passkey_not_found', 'No passkey of that id is yours.');
/** The answer for a passkey the console does not know (never added, removed, or its person removed): as a wrong password's. */
const unknownPasskey = () => new PlatformError('invalid_credentials', 'This passkey is not known to the console; sign in with your password.');

/** The response's shape, before the library checks its content: an object with a credential id and client data. */
function credentialOf(response: unknown): { id: string; clientData: { challenge?: unknown } } {
  const r = response as { id?: unknown; response?: { clientDataJSON?: unknown } } | null;
  if (!r || typeof r !== 'object' || Array.isArray(r) || typeof r.id !== 'string' || !r.response || typeof r.response !== 'object' || typeof r.response.clientDataJSON !== 'string') {
    throw new PlatformError('invalid_body', '`response` must be the credential the browser returned (as @simplewebauthn/browser gives it).', 'response');
  }
  if (!CREDENTIAL_ID.test(r.id)) throw passkeyFailed('the credential id is not base64url.');
  try {
    const clientData = JSON.parse(Buffer.from(r.response.clientDataJSON, 'base64url').toString('utf8')) as { challenge?: unknown };
    if (!clientData || typeof clientData !== 'object') throw new Error('not an object');
    return { id: r.id, clientData };
  } catch {
    throw passkeyFailed('its client data is not JSON.');
  }
}

/** A passkey's name: trimmed, 1 to 64 characters, no control characters; a default when none is given. */
function nameOf(name: unknown, count: number): string {
  if (name === undefined || name === null || name === '') return `Passkey ${count + 1}`;
  const value = typeof name === 'string' ? name.trim() : '';
  // eslint-disable-next-line no-control-regex
  if (!value || value.length > MAX_NAME || /[\u0000-\u001f\u007f]/.test(value)) {
    throw new PlatformError('invalid_body', `\`name\` must be 1 to ${MAX_NAME} characters without control characters.`, 'name');
  }
  return value;
}

export class Passkeys {
  constructor(
    private readonly kv: KeyValueStore,
    private readonly now: () => number,
  ) {}

  /** A person's passkeys, oldest first. */
  async list(personId: string): Promise<Passkey[]> {
    return (await this.items(personId)).map(view);
  }

  /** Options for navigator.credentials.create(): a challenge bound to the person and the session asking. */
  async registrationOptions(person: Person, rp: RelyingParty, sessionHash: string): Promise<PublicKeyCredentialCreationOptionsJSON> {
    const existing = await this.items(person.id);
    if (existing.length >= MAX_PASSKEYS) throw tooMany();
    const options = await generateRegistrationOptions({
      rpName: rp.name,
      rpID: rp.id,
      userName: person.email,
      userDisplayName: person.email,
      userID: new Uint8Array(userHandle(person)),
      challenge: new Uint8Array(randomBytes(32)),
      timeout: CEREMONY_MS,
      attestationType: 'none',
      // A passkey is discoverable (sign-in needs no email) and verifies its user (a PIN, a fingerprint):
      // it replaces the password, so it must be more than the possession of a device.
      authenticatorSelection: { residentKey: 'required', requireResidentKey: true, userVerification: 'required' },
      excludeCredentials: existing.map((item) => ({ id: String(item.id), transports: transportsOf(item) })),
    });
    await this.issue(options.challenge, 'registration', { person_id: person.id, session_hash: sessionHash });
    return options;
  }

  /**
   * Verifies a registration response against its challenge (issued to this person in this session, not
   * used, not expired), the console's origins and RP ID, and stores the credential.
   */
  async register(person: Person, rp: RelyingParty, sessionHash: string, response: unknown, name: unknown): Promise<Passkey> {
    const { clientData } = credentialOf(response);
    const challenge = await this.consume(clientData.challenge, 'registration');
    if (challenge.person_id !== person.id || challenge.session_hash !== sessionHash) throw passkeyFailed('the challenge was issued to another session.');
    const existing = await this.items(person.id);
    if (existing.length >= MAX_PASSKEYS) throw tooMany();
    const passkeyName = nameOf(name, existing.length);
    let verified;
    try {
      verified = await verifyRegistrationResponse({
        response: response as RegistrationResponseJSON,
        expectedChallenge: String(clientData.challenge),
        expectedOrigin: rp.origins,
        expectedRPID: rp.id,
        requireUserVerification: true,
      });
    } catch (error) {
      throw passkeyFailed(reason(error));
    }
    if (!verified.verified) throw passkeyFailed('the attestation did not verify.');
    const { credential, credentialDeviceType, credentialBackedUp } = verified.registrationInfo;
    const now = this.now();
    const item = {
      ...passkeyKey(credential.id),
      gsi1pk: `per#${person.id}`,
      gsi1sk: `pk#${credential.id}`,
      id: credential.id,
      person_id: person.id,
      organization_id: person.organization_id,
      public_key: Buffer.from(credential.publicKey).toString('base64url'),
      counter: credential.counter,
      transports: credential.transports ?? [],
      name: passkeyName,
      created_ms: now,
      last_used_ms: null,
      device_type: credentialDeviceType,
      backed_up: credentialBackedUp,
    };
    try {
      await this.kv.put(item, { ifAbsent: true });
    } catch (error) {
      if (!(error instanceof ConditionFailedError)) throw error;
      throw new PlatformError('already_exists', 'This passkey is added already.', 'response');
    }
    return view(item);
  }

  /** Removes one of the person's passkeys; another's (or an unknown id) is 404 passkey_not_found. */
  async remove(personId: string, id: string): Promise<void> {
    if (!CREDENTIAL_ID.test(id)) throw passkeyNotFound();
    try {
      await this.kv.delete(passkeyKey(id), { ifEquals: { person_id: personId } });
    } catch (error) {
      if (!(error instanceof ConditionFailedError)) throw error;
      throw passkeyNotFound();
    }
  }

  /**
   * Options for navigator.credentials.get(). No allowCredentials: the passkeys are discoverable, and a
   * list per email would tell anyone which emails have passkeys. An email given binds the challenge to
   * that person (the passkey used must be theirs) and hears a locked account's 429 before the prompt.
   */
  async signInOptions(rp: RelyingParty, email: unknown, address: string | undefined): Promise<PublicKeyCredentialRequestOptionsJSON> {
    const bound = email === undefined || email === null || email === '' ? undefined : normalEmail(email);
    if (bound) await new SignInLimits(this.kv, this.now).check(bound, address);
    const options = await generateAuthenticationOptions({ rpID: rp.id, challenge: new Uint8Array(randomBytes(32)), timeout: CEREMONY_MS, userVerification: 'required' });
    await this.issue(options.challenge, 'sign_in', bound ? { email: bound } : {});
    return options;
  }

  /**
   * Verifies a sign-in response: its challenge (single use, unexpired), a known passkey of a person who
   * still exists, the sign-in limits (a locked account is refused even with its passkey), then the
   * signature, origin, RP ID, user verification and counter (never below the stored one). Returns the
   * person; the counter and last use are stored.
   */
  async verifySignIn(rp: RelyingParty, response: unknown, address: string | undefined): Promise<Person> {
    const { id, clientData } = credentialOf(response);
    const challenge = await this.consume(clientData.challenge, 'sign_in');
    const limits = new SignInLimits(this.kv, this.now);
    const item = await this.kv.get(passkeyKey(id));
    const person = item && (await new People(this.kv, this.now).get(String(item.person_id)));
    if (!item || !person || person.organization_id !== item.organization_id) {
      // Counted against the address (and this credential id): guessing credentials is a failed sign-in too.
      const account = `passkey#${id}`;
      await limits.check(account, address);
      await limits.fail(account, address);
      if (item) await this.kv.delete(passkeyKey(id), { ifEquals: { person_id: String(item.person_id) } }).catch(() => undefined);
      throw unknownPasskey();
    }
    if (challenge.email !== undefined && challenge.email !== person.email) {
      await limits.fail(String(challenge.email), address);
      throw new PlatformError('invalid_credentials', 'This passkey is not one of the email you gave.');
    }
    await limits.check(person.email, address);
    const handle = (response as { response: { userHandle?: unknown } }).response.userHandle;
    const stored = Number(item.counter);
    try {
      if (handle !== undefined && handle !== null && handle !== userHandle(person).toString('base64url')) throw new Error('the user handle is not the passkey\'s person.');
      const verified = await verifyAuthenticationResponse({
        response: response as AuthenticationResponseJSON,
        expectedChallenge: String(clientData.challenge),
        expectedOrigin: rp.origins,
        expectedRPID: rp.id,
        credential: { id, publicKey: Buffer.from(String(item.public_key), 'base64url'), counter: stored, transports: transportsOf(item) },
        requireUserVerification: true,
      });
      if (!verified.verified) throw new Error('the signature did not verify.');
      const counter = verified.authenticationInfo.newCounter;
      // The library refuses a counter at or below the stored one (unless both are 0, authenticators that
      // keep none); said again here because a regression means a cloned authenticator.
      if ((counter > 0 || stored > 0) && counter <= stored) throw new Error(`the signature counter went back (${counter} after ${stored}); this may be a cloned authenticator.`);
      await this.kv
        .update({ key: passkeyKey(id), set: { counter, last_used_ms: this.now(), backed_up: verified.authenticationInfo.credentialBackedUp }, condition: { ifEquals: { counter: stored, person_id: person.id } } })
        .catch((error: unknown) => {
          if (error instanceof ConditionFailedError) throw new Error('the passkey was used or removed meanwhile.');
          throw error;
        });
    } catch (error) {
      await limits.fail(person.email, address);
      throw passkeyFailed(reason(error));
    }
    return person;
  }

  private async items(personId: string): Promise<KvItem[]> {
    const out: KvItem[] = [];
    let cursor: string | undefined;
    do {
      const page = await this.kv.query({ index: 'gsi1', pk: `per#${personId}`, sk: { beginsWith: 'pk#' }, limit: 100, cursor });
      out.push(...page.items);
      cursor = page.cursor;
    } while (cursor);
    return out.sort((a, b) => Number(a.created_ms) - Number(b.created_ms));
  }

  private async issue(challenge: string, purpose: Purpose, binding: Record<string, string>): Promise<void> {
    const expiresMs = this.now() + CHALLENGE_MS;
    await this.kv.put({ ...challengeKey(challenge), purpose, ...binding, expires_ms: expiresMs, expires_at: Math.ceil(expiresMs / 1000) }, { ifAbsent: true });
  }

  /**
   * Takes a challenge once: of two answers carrying it, only the one whose conditioned delete succeeds
   * goes on; an unknown, expired, spent or other-purpose challenge is 400 passkey_failed.
   */
  private async consume(challenge: unknown, purpose: Purpose): Promise<KvItem> {
    if (typeof challenge !== 'string' || !/^[A-Za-z0-9_-]{16,128}$/.test(challenge)) throw passkeyFailed('its challenge is missing.');
    const key = challengeKey(challenge);
    const item = await this.kv.get(key);
    if (!item || item.purpose !== purpose || Number(item.expires_ms) <= this.now()) {
      throw passkeyFailed('its challenge is unknown, used or expired; start again.');
    }
    try {
      await this.kv.delete(key, { ifEquals: { expires_ms: Number(item.expires_ms), purpose } });
    } catch (error) {
      if (!(error instanceof ConditionFailedError)) throw error;
      throw passkeyFailed('its challenge is unknown, used or expired; start again.');
    }
    return item;
  }
}

const tooMany = () => new PlatformError('too_many_passkeys', `A person may hold at most ${MAX_PASSKEYS} passkeys; remove one first.`);

const transportsOf = (item: KvItem): AuthenticatorTransport[] => (Array.isArray(item.transports) ? (item.transports.map(String) as AuthenticatorTransport[]) : []);

/** The library's reason, as one sentence (its messages name the check that failed, nothing secret). */
function reason(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const text = message.trim().replace(/\s+/g, ' ').slice(0, 300);
  return /[.!?]$/.test(text) ? text : `${text}.`;
}

/**
 * Signs a person in with a passkey: verified as above, then a new session exactly as the password's
 * sign-in makes one (the browser's previous session ended), after the organization's check.
 */
export async function signInWithPasskey(
  engine: Engine,
  input: { rp: RelyingParty; response: unknown; address?: string; previousToken?: string },
  cacheMs?: number,
): Promise<{ person: Person; session: NewSession }> {
  const now = () => engine.clock.now();
  const person = await new Passkeys(engine.kv, now).verifySignIn(input.rp, input.response, input.address);
  const organization = await new Tenants(engine.kv, now).getOrganization(person.organization_id);
  if (!organization) throw unknownPasskey();
  if (organization.disabled) throw new PlatformError('organization_disabled', 'The organization is disabled.');
  await new SignInLimits(engine.kv, now).succeed(person.email);
  const session = await new Sessions(engine.kv, now, cacheMs).create(person, input.previousToken);
  return { person, session };
}
