import * as z from 'zod/mini';
import { onFirstUse, parseQuery } from '../../../shared/validate.js';

const noQuerySchema = onFirstUse(() => z.strictObject({}));

/** Routes that take no query (spec 7: only `GET /dead` takes `limit`): any parameter is 400 invalid_query, naming it. */
export function refuseQuery(query: Record<string, string>, what: string): void {
  parseQuery(noQuerySchema(), query, { takes: `${what} take no query parameters` });
}
