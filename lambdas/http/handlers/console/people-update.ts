import * as z from 'zod/mini';
import { httpHandler } from '../../handler.js';
import { People } from '../../../console/people.js';
import { Sessions } from '../../../console/sessions.js';
import { actorOf, body, personView } from './shared.js';

const Update = z.strictObject({ role: z.string() });

/** PATCH /console/api/people/{person_id} `{role}`: admins and owners, up to their own role; never the last owner's. */
export const handler = httpHandler('console.people.update', async (req, scope) => {
  const { engine } = scope;
  const { role } = body(Update, req);
  const person = await new People(engine.kv, () => engine.clock.now()).setRole(actorOf(scope), req.params.person_id, role);
  // This process applies it at once; the others within CREDENTIAL_CACHE_MS.
  Sessions.forget(person.id);
  return { status: 200, body: { person: personView(person) } };
});
