import { PlatformError } from '../../../shared/errors.js';

/** Routes that take no query (spec 7: only `GET /dead` takes `limit`): any parameter is 400 invalid_query, naming it. */
export function refuseQuery(query: Record<string, unknown>, what: string): void {
  const param = Object.keys(query)[0];
  if (param !== undefined) throw new PlatformError('invalid_query', `${what} take no query parameters.`, param);
}
