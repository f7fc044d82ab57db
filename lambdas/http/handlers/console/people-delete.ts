import { httpHandler } from '../../handler.js';
import { People } from '../../../console/people.js';
import { Sessions } from '../../../console/sessions.js';
import { actorOf } from './shared.js';

/** DELETE /console/api/people/{person_id}: removes the person; their sessions end at once. */
export const handler = httpHandler('console.people.delete', async (req, scope) => {
  const { engine } = scope;
  const now = () => engine.clock.now();
  const person = await new People(engine.kv, now).remove(actorOf(scope), req.params.person_id);
  await new Sessions(engine.kv, now).endAllFor(person.id);
  return { status: 204 };
});
