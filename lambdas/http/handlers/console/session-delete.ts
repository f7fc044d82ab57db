import { httpHandler } from '../../handler.js';
import { Sessions } from '../../../console/sessions.js';
import { clearedCookies } from '../../cookies.js';
import { secureCookies } from '../../console-origin.js';
import { sessionToken } from './shared.js';

/** DELETE /console/api/session: signs out; the session ends at once, the cookies are cleared. */
export const handler = httpHandler('console.session.delete', async (req, { engine }) => {
  const token = sessionToken(req);
  if (token) await new Sessions(engine.kv, () => engine.clock.now()).end(token);
  return { status: 204, cookies: clearedCookies(secureCookies()) };
});
