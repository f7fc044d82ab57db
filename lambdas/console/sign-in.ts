/**
 * Signing in to the console with an email and a password (docs/decisions/console-sessions.md), the
 * one place its rules run: the sign-in limits first (a locked account is refused even with the right
 * password), one scrypt whether or not the email has an account (the time tells nothing), one answer
 * for a wrong email and a wrong password (`401 invalid_credentials`), then a new session.
 */
import type { Engine } from '../engine/ports.js';
import { PlatformError } from '../shared/errors.js';
import { Tenants } from '../auth/tenants.js';
import { normalEmail, type Person } from './people.js';
import { People } from './people.js';
import { spendVerification, verifyPassword } from './passwords.js';
import { SignInLimits } from './sign-in-limits.js';
import { Sessions, type NewSession } from './sessions.js';

export interface SignInInput {
  email: unknown;
  password: unknown;
  /** The caller's address, for the per-address limit. */
  address?: string;
  /** The session token the browser sent, ended by the new sign-in. */
  previousToken?: string;
}

const wrong = () => new PlatformError('invalid_credentials', 'The email or the password is wrong.');

export async function signIn(engine: Engine, input: SignInInput, cacheMs?: number): Promise<{ person: Person; session: NewSession }> {
  const now = () => engine.clock.now();
  const email = normalEmail(input.email);
  if (typeof input.password !== 'string' || !input.password) throw new PlatformError('invalid_body', '`password` must be a non-empty string.', 'password');
  const limits = new SignInLimits(engine.kv, now);
  await limits.check(email, input.address);
  const found = await new People(engine.kv, now).findForSignIn(email);
  const ok = found ? await verifyPassword(input.password, found.password_hash) : (await spendVerification(input.password), false);
  if (!found || !ok) {
    await limits.fail(email, input.address);
    throw wrong();
  }
  const { password_hash: _hash, ...person } = found;
  const organization = await new Tenants(engine.kv, now).getOrganization(person.organization_id);
  if (!organization) throw wrong();
  if (organization.disabled) throw new PlatformError('organization_disabled', 'The organization is disabled.');
  await limits.succeed(email);
  const session = await new Sessions(engine.kv, now, cacheMs).create(person, input.previousToken);
  return { person, session };
}

/** Accepting an invitation signs its new person in at once, as a sign-in does. */
export async function sessionFor(engine: Engine, person: Person, previousToken?: string, cacheMs?: number): Promise<NewSession> {
  return new Sessions(engine.kv, () => engine.clock.now(), cacheMs).create(person, previousToken);
}
