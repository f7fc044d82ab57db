import { httpHandler } from '../../handler.js';
import { People } from '../../../console/people.js';
import { page, pageOf, personView, tenantCall } from './shared.js';

/** GET /console/api/people: the organization's people, oldest first, a page at a time. */
export const handler = httpHandler('console.people.list', async (req, { engine, principal }) => {
  const list = await tenantCall(new People(engine.kv, () => engine.clock.now()).list(principal.organizationId, pageOf(req)));
  return { status: 200, body: page({ data: list.data.map(personView), next_cursor: list.next_cursor }) };
});
