/** What every OpenAI compatibility route answers alike: list pages and their query, poll hints. */
import * as z from 'zod/mini';
import { PlatformError } from '../../shared/errors.js';

/** OpenAI's cursor page: the SDK reads `data` and `has_more` and asks the next with `after=<last id>`. */
export interface ListPage<T extends { id: string }> {
  object: 'list';
  data: T[];
  first_id: string | null;
  last_id: string | null;
  has_more: boolean;
}
export const listPage = <T extends { id: string }>(data: T[], hasMore: boolean): ListPage<T> => ({
  object: 'list',
  data,
  first_id: data[0]?.id ?? null,
  last_id: data.at(-1)?.id ?? null,
  has_more: hasMore,
});

export interface ListQuery {
  after?: string;
  before?: string;
  limit: number;
  order: 'asc' | 'desc';
}

/**
 * `after`, `before`, `limit` (1…100, default 20) and `order` (default `desc`), OpenAI's list parameters;
 * `extra` names the route's own (`filter`, `purpose`), which are returned as given. Unknown parameters: 400.
 */
export function parseListQuery(query: Record<string, string | undefined>, extra: readonly string[] = []): ListQuery & { extra: Record<string, string> } {
  const known = new Set(['after', 'before', 'limit', 'order', ...extra]);
  for (const name of Object.keys(query)) if (!known.has(name)) throw new PlatformError('unsupported_field', `Unknown query parameter "${name.slice(0, 64)}".`, name.slice(0, 64));
  const limitText = query.limit ?? '20';
  const limit = /^\d{1,4}$/.test(limitText) ? Number(limitText) : NaN;
  if (!(limit >= 1 && limit <= 100)) throw new PlatformError('invalid_body', '`limit` must be an integer from 1 to 100.', 'limit');
  const order = query.order ?? 'desc';
  if (order !== 'asc' && order !== 'desc') throw new PlatformError('invalid_body', '`order` must be `asc` or `desc`.', 'order');
  for (const name of ['after', 'before'] as const) {
    const v = query[name];
    if (v !== undefined && (v.length === 0 || v.length > 200)) throw new PlatformError('invalid_body', `\`${name}\` must be an object id.`, name);
  }
  const extras: Record<string, string> = {};
  for (const name of extra) if (query[name] !== undefined) extras[name] = query[name]!;
  return { after: query.after, before: query.before, limit, order, extra: extras };
}

/**
 * The SDK's poll helpers (`createAndPoll`, `uploadAndPoll`) wait this header's milliseconds between
 * reads, else 5 s: answered while a file or batch is in progress.
 */
export const POLL_AFTER_HEADERS = { 'openai-poll-after-ms': '1000' } as const;

/** Metadata as OpenAI takes it: up to 16 pairs, keys up to 64 characters, string values up to 512. */
export const metadataSchema = z.record(z.string().check(z.minLength(1), z.maxLength(64)), z.string().check(z.maxLength(512))).check(
  z.refine((m) => Object.keys(m).length <= 16, 'at most 16 metadata pairs'),
);
