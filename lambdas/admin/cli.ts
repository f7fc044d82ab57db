/**
 * The admin CLI: one JSON document on stdout per command, errors on stderr with a non-zero exit.
 * It acts on the engine the environment selects (DATA_DIR for the embedded one, ENGINE=aws for AWS).
 * Each command is a definition (./command.ts): its usage line, its `--help` and the README's table
 * are generated from it.
 */
import { parseArgs } from 'node:util';
import type { Engine } from '../engine/ports.js';
import { LIST_MAX, Tenants, TenantError, type ListOptions, type ListPage, type SecretKeyRecord } from '../auth/tenants.js';
import type { Capability } from '../auth/principal.js';
import { ModelRouteError, ModelRoutes } from '../ai/model-routes.js';
import { AiOrgSettings, OrgSettingsError, type OrgAiLimits } from '../ai/org-settings.js';
import { AiKeyLimits, AiLimitsError, budgetState, checkLimits, keyScope, orgScope } from '../ai/limits.js';
import { AiKeyRoutes, AiKeyRoutesError } from '../ai/key-routes.js';
import { OAuthClients } from '../auth/oauth-clients.js';
import { PublishableKeys } from '../auth/publishable-keys.js';
import { EVENTS_PERMISSIONS, unknownPermissions } from '../auth/permissions.js';
import { backfillTimeKeys } from '../data/record-times.js';
import { EventBusAllowListError, allowEventBus, listEventBuses, revokeEventBus } from '../events/eventbridge.js';
import { commandHelp, PROGRAM, programHelp, usageLine, type Command, type Options } from './command.js';
import { RERANK_COMMANDS } from './rerank-commands.js';
import { VECTOR_COMMANDS } from './vector-commands.js';
import { VectorDatabaseError } from '../vector/databases.js';
import { RerankProfileError } from '../vector/rerank-profiles.js';
import { configuredConsoleUrl, expiryOf, invitationUrl, Invitations } from '../console/invitations.js';
import { ROLES } from '../console/roles.js';
import { PlatformError } from '../shared/errors.js';

export class UsageError extends Error {
  override name = 'UsageError';
}

// Options several commands share; what one means is said where its name and placeholder do not say it.
const id = { type: 'string', value: 'ID' } as const;
const name = { type: 'string', value: 'N' } as const;
const permissions = {
  type: 'string',
  value: 'a,b',
  help: 'narrows it on the Events API (left out: every Events permission; list and rules in `docs/events/permissions.md`)',
} as const;
const LIMIT_OPTIONS = {
  rpm: { type: 'string', value: 'N', help: 'requests a minute (`429 rate_limited`)' },
  tpm: { type: 'string', value: 'N', help: 'tokens a minute, input estimate plus output ceiling until the real usage is known (`429 quota_exceeded`)' },
  concurrency: { type: 'string', value: 'N', help: 'calls at once (`429 concurrency_limited`)' },
  'budget-usd': { type: 'string', value: 'X', help: 'USD on priced routes in all (`429 budget_exhausted`)' },
} as const;
const LIMIT_FIELDS = { rpm: 'rpm', tpm: 'tpm', concurrency: 'concurrency', 'budget-usd': 'budget_usd' } as const;
// An organization's only: what a knowledge job may be priced at, not a limit of its calls.
const ORG_LIMIT_OPTIONS = {
  ...LIMIT_OPTIONS,
  'knowledge-job-cap-usd': { type: 'string', value: 'X', help: 'the highest `max_price_usd` a knowledge job may be started with (above it `403 budget_exceeded`; no cap by default)' },
  'knowledge-keep-source-hours': { type: 'string', value: 'N', help: 'the most `keep_source_hours` a knowledge job may ask, 1 to 168 (above it `400 invalid_body`; 168 by default)' },
} as const;
const ORG_LIMIT_FIELDS = { ...LIMIT_FIELDS, 'knowledge-job-cap-usd': 'knowledge_job_cap_usd', 'knowledge-keep-source-hours': 'knowledge_keep_source_hours' } as const;
const LIMITS_NOTE = '`none` lifts a limit, an option left out keeps it, no option only shows them';
const CACHE_NOTE = 'changes reach a running server within `MODEL_ROUTES_CACHE_MS`';

const tenants = (e: Engine) => new Tenants(e.kv, () => e.clock.now());
const routes = (e: Engine) => new ModelRoutes(e.kv, () => e.clock.now());
const str = (o: Options, k: string) => o[k] as string;

/**
 * `--permissions a,b`: the Events permissions a key or OAuth client is narrowed to (absent: all of
 * them). An unknown name or an empty list is a usage error (exit 2), naming the known permissions.
 */
function permissionsOption(o: Options): { permissions?: string[] } {
  const raw = o.permissions;
  if (raw === undefined) return {};
  const list = String(raw).split(',').map((p) => p.trim()).filter(Boolean);
  const known = `known permissions: ${EVENTS_PERMISSIONS.join(', ')}`;
  if (!list.length) throw new UsageError(`--permissions needs at least one permission (leave it out for all of them); ${known}`);
  const unknown = unknownPermissions(list);
  if (unknown.length) throw new UsageError(`unknown permissions: ${unknown.join(', ')}; ${known}`);
  return { permissions: list };
}

/** A numeric option: absent is undefined; anything but a finite number is a usage error. */
function numberOption(o: Options, name: string): number | undefined {
  if (o[name] === undefined) return undefined;
  // Plain decimal notation only: Number() would also take 0x10, 1e2, ' 5' and Infinity.
  if (!/^-?\d+(\.\d+)?$/.test(String(o[name]))) throw new UsageError(`--${name} takes a number, got "${String(o[name])}"`);
  return Number(o[name]);
}

const aiSettings = (e: Engine) => new AiOrgSettings(e.kv, () => e.clock.now());

// The list commands: a page at a time, `{data, next_cursor}` (docs/decisions/admin-lists.md).
const PAGE_OPTIONS = {
  limit: { type: 'string', value: 'N', help: `at most N per page, 1 to ${LIST_MAX} (default ${LIST_MAX})` },
  cursor: { type: 'string', value: 'C', help: 'the page after the one that printed this `next_cursor`' },
} as const;
const PAGED = `\`{data: […], next_cursor}\`, oldest first, a page at a time (\`--limit\`; the next with \`--cursor\` and the \`next_cursor\` printed, null on the last), so no list is read whole at once`;
function pageOptions(o: Options): ListOptions {
  const limit = numberOption(o, 'limit');
  if (limit !== undefined && !(Number.isSafeInteger(limit) && limit >= 1 && limit <= LIST_MAX)) throw new UsageError(`--limit takes a whole number from 1 to ${LIST_MAX}, got "${String(o.limit)}"`);
  return { limit, cursor: o.cursor === undefined ? undefined : str(o, 'cursor') };
}
const oauthClients = (e: Engine) => new OAuthClients(e.kv, () => e.clock.now());
const publishableKeys = (e: Engine) => new PublishableKeys(e.kv, () => e.clock.now());
const originsOption = (o: Options) => str(o, 'origins').split(',').map((x) => x.trim()).filter(Boolean);

/** A page of secret keys with each key's own AI limits and routes (`key limits`, `key routes`). */
async function withKeySettings(e: Engine, page: ListPage<SecretKeyRecord>) {
  const limits = new AiKeyLimits(e.kv, () => e.clock.now());
  const keyRoutes = new AiKeyRoutes(e.kv, () => e.clock.now());
  const data = await Promise.all(page.data.map(async (k) => ({ ...k, limits: await limits.get(k.id), routes: await keyRoutes.get(k.id) })));
  return { data, next_cursor: page.next_cursor };
}

async function existingOrg(e: Engine, o: Options): Promise<string> {
  const id = str(o, 'org');
  if (!(await tenants(e).getOrganization(id))) throw new TenantError(`no organization ${id}`);
  return id;
}

const isNone = (o: Options, name: string) => String(o[name]).trim().toLowerCase() === 'none';

/**
 * A route's price option: a number, or `none` for no price (as leaving it out: `route set` writes the
 * whole route).
 */
const priceOption = (o: Options, name: string) => (o[name] !== undefined && isNone(o, name) ? undefined : numberOption(o, name));

/** `--rpm 60 --budget-usd none`: the limits to set; `none` lifts one (null), an absent option leaves it. */
function limitsOptions(o: Options, fields: Record<string, keyof OrgAiLimits> = LIMIT_FIELDS): Partial<OrgAiLimits> {
  const limits: Partial<OrgAiLimits> = {};
  for (const [option, field] of Object.entries(fields)) {
    if (o[option] === undefined) continue;
    limits[field] = isNone(o, option) ? null : (numberOption(o, option) as number);
  }
  return checkLimits(limits);
}

const GRANT_SUMMARY =
  "the organization's AI settings `{organization_id, granted_fields, limits}`; fields grantable on chat: `n`, `service_tier`, `store`, `metadata`, `modalities`, `audio`, `web_search_options` (any other is refused, listing them); a field not granted answers `403 field_not_allowed`; " + CACHE_NOTE;
const EVENT_BUS_SUMMARY = "the event buses the organization's `eventbridge` subscriptions may deliver to (checked at creation and at every delivery; docs/events/eventbridge.md)";

export const COMMANDS: Record<string, Command> = {
  'org create': {
    summary: 'the organization `{id, name, disabled, created_at}`',
    options: { name },
    required: ['name'],
    run: (e, o) => tenants(e).createOrganization(str(o, 'name')),
  },
  'org disable': {
    summary: 'the organization; every key of a disabled one answers `403 organization_disabled`',
    options: { org: id },
    required: ['org'],
    run: (e, o) => tenants(e).setOrganizationDisabled(str(o, 'org'), true),
  },
  'org enable': { summary: 'the organization, enabled again', options: { org: id }, required: ['org'], run: (e, o) => tenants(e).setOrganizationDisabled(str(o, 'org'), false) },
  'org invite': {
    summary:
      "`{invitation_url, expires_at}`: a person's invitation into the organization with that role, for the console (docs/console.md). The link (`<CONSOLE_URL>/invite#<token>`, default `http://127.0.0.1:8084`) is printed this once, only the token's hash is stored; it works once, until it expires. One email belongs to one organization",
    options: {
      org: id,
      email: { type: 'string', value: 'E' },
      role: { type: 'string', value: ROLES.join('|') },
      'expires-in': { type: 'string', value: 'T', help: 'how long the link works: `7d` (the default), `12h`, `30m`; at most `30d`' },
    },
    required: ['org', 'email', 'role'],
    run: async (e, o) => {
      const org = await existingOrg(e, o);
      if (!(ROLES as readonly string[]).includes(str(o, 'role'))) throw new UsageError(`--role takes one of ${ROLES.join(', ')}, got "${str(o, 'role')}"`);
      let expiresInMs: number | undefined;
      if (o['expires-in'] !== undefined) {
        try {
          expiresInMs = expiryOf(str(o, 'expires-in'), 'expires-in');
        } catch {
          throw new UsageError(`--expires-in takes a duration from 1m to 30d such as 7d, 12h or 30m, got "${str(o, 'expires-in')}"`);
        }
      }
      const { invitation, token } = await new Invitations(e.kv, () => e.clock.now()).create({ organizationId: org, email: str(o, 'email'), role: str(o, 'role'), expiresInMs });
      return { invitation_url: invitationUrl(configuredConsoleUrl(), token), expires_at: invitation.expires_at };
    },
  },
  'org list': {
    summary: `the organizations ${PAGED}; one made before this list existed shows once a command changes it (\`org enable\`)`,
    options: { ...PAGE_OPTIONS },
    required: [],
    run: (e, o) => tenants(e).listOrganizations(pageOptions(o)),
  },
  'org grant-field': {
    summary: GRANT_SUMMARY,
    options: { org: id, field: { type: 'string', value: 'NAME' } },
    required: ['org', 'field'],
    run: async (e, o) => aiSettings(e).grantField(await existingOrg(e, o), str(o, 'field')),
  },
  'org revoke-field': {
    summary: GRANT_SUMMARY,
    options: { org: id, field: { type: 'string', value: 'NAME' } },
    required: ['org', 'field'],
    run: async (e, o) => aiSettings(e).revokeField(await existingOrg(e, o), str(o, 'field')),
  },
  'org eventbridge-allow': {
    summary: EVENT_BUS_SUMMARY,
    options: { org: id, arn: { type: 'string', value: 'ARN' } },
    required: ['org', 'arn'],
    run: async (e, o) => allowEventBus(e, await existingOrg(e, o), str(o, 'arn')),
  },
  'org eventbridge-revoke': {
    summary: EVENT_BUS_SUMMARY,
    options: { org: id, arn: { type: 'string', value: 'ARN' } },
    required: ['org', 'arn'],
    run: async (e, o) => revokeEventBus(e, await existingOrg(e, o), str(o, 'arn')),
  },
  'org eventbridge-list': {
    summary: EVENT_BUS_SUMMARY,
    options: { org: id },
    required: ['org'],
    run: async (e, o) => ({ data: await listEventBuses(e, await existingOrg(e, o)) }),
  },
  'org limits': {
    summary:
      "the AI settings and `budget {spent_usd, held_usd}`; limits of all the organization's AI calls; " +
      `${LIMITS_NOTE}; ${CACHE_NOTE}. Design in \`docs/decisions/ai-limits.md\`, usage records in \`docs/decisions/ai-usage.md\``,
    options: { org: id, ...ORG_LIMIT_OPTIONS },
    required: ['org'],
    run: async (e, o) => {
      const org = await existingOrg(e, o);
      const limits = limitsOptions(o, ORG_LIMIT_FIELDS);
      const settings = Object.keys(limits).length ? await aiSettings(e).setLimits(org, limits) : await aiSettings(e).get(org);
      return { ...settings, budget: await budgetState(e.kv, orgScope(org), e.clock.now()) };
    },
  },
  // Whether the organization's AI writes need X-Operation-Id (docs/decisions/operation-ids-optional.md).
  'org settings': {
    summary: `the organization's AI settings, \`operation_ids\` among them; ${CACHE_NOTE}`,
    options: {
      org: id,
      'operation-ids': {
        type: 'string',
        value: 'required|optional',
        help: '`optional` lets its AI writes go without `X-Operation-Id` (the official SDKs send none; docs/ai/quickstart.md); `required` (the default) answers them `400 missing_operation_id`',
      },
    },
    required: ['org'],
    run: async (e, o) => {
      const org = await existingOrg(e, o);
      return o['operation-ids'] === undefined ? aiSettings(e).get(org) : aiSettings(e).setOperationIds(org, str(o, 'operation-ids'));
    },
  },
  'workspace create': {
    summary: 'the workspace `{id, organization_id, name, created_at}`',
    options: { org: id, name },
    required: ['org', 'name'],
    run: (e, o) => tenants(e).createWorkspace(str(o, 'org'), str(o, 'name')),
  },
  'workspace list': {
    summary: `the organization's workspaces ${PAGED}`,
    options: { org: id, ...PAGE_OPTIONS },
    required: ['org'],
    run: (e, o) => tenants(e).listWorkspaces(str(o, 'org'), pageOptions(o)),
  },
  'app create': {
    summary: 'the application',
    options: { workspace: id, name, capabilities: { type: 'string', value: 'a,b', help: 'from `ai.chat`, `ai.embeddings`, `knowledge`, `decision`' } },
    required: ['workspace', 'name'],
    run: (e, o) =>
      tenants(e).createApplication(
        str(o, 'workspace'),
        str(o, 'name'),
        (str(o, 'capabilities') ?? '').split(',').map((c) => c.trim()).filter(Boolean) as Capability[],
      ),
  },
  'app list': {
    summary: `the workspace's applications ${PAGED} (a page may hold fewer than \`--limit\`, with a \`next_cursor\`: they are read from the organization's)`,
    options: { workspace: id, ...PAGE_OPTIONS },
    required: ['workspace'],
    run: (e, o) => tenants(e).listApplications(str(o, 'workspace'), pageOptions(o)),
  },
  'app disable': {
    summary:
      "the application `{…, disabled: true}`; every credential bound to it (its secret keys, OAuth clients' tokens, publishable keys, end users' tokens) answers `403 key_disabled` within `CREDENTIAL_CACHE_MS` and its OAuth clients get no token; organization-wide keys and its data are untouched",
    options: { app: id },
    required: ['app'],
    run: (e, o) => tenants(e).setApplicationDisabled(str(o, 'app'), true),
  },
  'app enable': {
    summary: 'the application, enabled again (its credentials work within `CREDENTIAL_CACHE_MS`)',
    options: { app: id },
    required: ['app'],
    run: (e, o) => tenants(e).setApplicationDisabled(str(o, 'app'), false),
  },
  'key create': {
    summary: '`{id, key, permissions}`: the secret key `aik_…` is shown this once, only its hash is stored (`permissions: null`: every Events permission)',
    options: { org: id, app: id, permissions },
    required: ['org'],
    run: async (e, o) => {
      const { id, key, record } = await tenants(e).createSecretKey(str(o, 'org'), str(o, 'app'), permissionsOption(o));
      // permissions: null is every Events permission (docs/events/permissions.md).
      return { id, key, permissions: record.permissions };
    },
  },
  'key list': {
    summary: `the organization's secret keys, or one application's, ${PAGED}: each \`{id, organization_id, application_id, last4, disabled, permissions, created_at, limits, routes}\` (\`last4\`: the secret's last 4 characters, null for a key made before they were kept; never the secret nor its hash; \`limits\` and \`routes\` as \`key limits\` and \`key routes\` set them); a key made before this list existed shows once \`key disable\` or \`key enable\` touches it`,
    options: { org: id, app: { type: 'string', value: 'ID', help: "only this application's keys (a page may then hold fewer than `--limit`, with a `next_cursor`)" }, ...PAGE_OPTIONS },
    required: ['org'],
    run: async (e, o) => withKeySettings(e, await tenants(e).listSecretKeys(str(o, 'org'), { ...pageOptions(o), applicationId: o.app === undefined ? undefined : str(o, 'app') })),
  },
  'key disable': {
    summary: 'the key record (never the secret); a disabled key answers `403 key_disabled` within `CREDENTIAL_CACHE_MS`',
    options: { 'key-id': id },
    required: ['key-id'],
    run: (e, o) => tenants(e).setSecretKeyDisabled(str(o, 'key-id'), true),
  },
  'key enable': {
    summary: 'the key record (never the secret), enabled again within `CREDENTIAL_CACHE_MS`',
    options: { 'key-id': id },
    required: ['key-id'],
    run: (e, o) => tenants(e).setSecretKeyDisabled(str(o, 'key-id'), false),
  },
  'key limits': {
    summary: `\`{key_id, limits, budget}\`: a secret key's own AI limits, applied on top of its organization's, as for \`org limits\`; ${LIMITS_NOTE}`,
    options: { 'key-id': id, ...LIMIT_OPTIONS },
    required: ['key-id'],
    run: async (e, o) => {
      const keyId = str(o, 'key-id');
      const set = await new AiKeyLimits(e.kv, () => e.clock.now()).set(keyId, limitsOptions(o));
      return { ...set, budget: await budgetState(e.kv, keyScope(keyId), e.clock.now()) };
    },
  },
  'key routes': {
    summary: '`{key_id, routes}`: the model routes a secret key may call (others answer `403 route_forbidden`, and `GET /v1/models` lists only these)',
    options: { 'key-id': id, routes: { type: 'string', value: 'a,b' }, all: { type: 'boolean', help: 'lifts the list' } },
    required: ['key-id'],
    oneOf: ['routes', 'all'],
    run: async (e, o) =>
      new AiKeyRoutes(e.kv, () => e.clock.now()).set(str(o, 'key-id'), o.all ? null : str(o, 'routes').split(',').map((r) => r.trim())),
  },
  'route set': {
    summary: `the model route; ${CACHE_NOTE}`,
    options: {
      org: id,
      id: { type: 'string', value: 'ROUTE' },
      endpoint: { type: 'string', value: 'PATH', help: 'one of `/v1/chat/completions`, `/v1/embeddings`, `/v1/run`, `/v1/audio/transcriptions` (what knowledge collections and jobs transcribe recordings with: no public route)' },
      provider: {
        type: 'string',
        value: 'openai-compatible|bedrock|http|decision',
        help: '`openai-compatible` (chat, embeddings, transcriptions; `--base-url` like `https://api.openai.com/v1`), `bedrock` (chat, embeddings; `--model` the Bedrock model id), `http` (run; `--base-url` is the whole URL the `input` is POSTed to) or `decision` (run; `--tiers` its chat routes, weakest first)',
      },
      'base-url': { type: 'string', value: 'URL', help: 'may not carry credentials (`user:password@`)' },
      model: { type: 'string', value: 'UPSTREAM_MODEL', help: 'the model the upstream is asked for' },
      default: { type: 'boolean', help: "makes it the endpoint's default and clears the flag on the others" },
      'max-tokens': {
        type: 'string',
        value: 'N',
        help: 'the output ceiling a request can only lower (a route with `--price-out-per-mtok` and no `--max-tokens` sends 4,096, the most a budget holds)',
      },
      'no-tools': { type: 'boolean', help: 'refuses `tools`' },
      'timeout-ms': { type: 'string', value: 'N', help: 'the upstream timeout (default 60,000)' },
      tiers: { type: 'string', value: 'a,b' },
      'price-in-per-mtok': { type: 'string', value: 'X', help: 'USD per million input tokens (`none`: unpriced, as leaving it out)' },
      'price-out-per-mtok': { type: 'string', value: 'X', help: 'USD per million output tokens (`none` as above)' },
      'price-per-minute': {
        type: 'string',
        value: 'X',
        help: '`/v1/audio/transcriptions` routes only: USD per minute of audio transcribed, on top of any token price (`none` as above)',
      },
      'api-key-env': {
        type: 'string',
        value: 'NAME',
        help: 'names the upstream key: an environment variable of `npm start`, a Secrets Manager secret in AWS (never the key itself)',
      },
      'max-answer-bytes': { type: 'string', value: 'N', help: "caps what is read of the upstream's answer (default 32 MiB); past it, `502 upstream_error` (docs/ai/chat.md)" },
      'max-event-bytes': { type: 'string', value: 'N', help: 'caps one stream line (default 1 MiB), as `--max-answer-bytes` does' },
      force: { type: 'boolean', help: "changes the upstream of a route a vector database is stamped with (its stored vectors came from the old model; docs/ai/vector.md)" },
    },
    required: ['org', 'id', 'endpoint', 'provider'],
    run: async (e, o) => {
      if (!(await tenants(e).getOrganization(str(o, 'org')))) throw new TenantError(`no organization ${str(o, 'org')}`);
      return routes(e).set(str(o, 'org'), {
        id: str(o, 'id'),
        endpoint: str(o, 'endpoint'),
        provider: str(o, 'provider'),
        base_url: str(o, 'base-url'),
        upstream_model: str(o, 'model'),
        default: o.default === true,
        max_tokens: numberOption(o, 'max-tokens'),
        tools: o['no-tools'] === true ? false : undefined,
        timeout_ms: numberOption(o, 'timeout-ms'),
        tiers: o.tiers === undefined ? undefined : str(o, 'tiers').split(',').map((t) => t.trim()).filter(Boolean),
        price_in_per_mtok: priceOption(o, 'price-in-per-mtok'),
        price_out_per_mtok: priceOption(o, 'price-out-per-mtok'),
        price_per_minute: priceOption(o, 'price-per-minute'),
        api_key_env: str(o, 'api-key-env'),
        max_answer_bytes: numberOption(o, 'max-answer-bytes'),
        max_event_bytes: numberOption(o, 'max-event-bytes'),
      }, { force: o.force === true });
    },
  },
  'route list': {
    summary: '`{data: [route, …]}` with the upstream settings and prices (`price_in_per_mtok`, `price_out_per_mtok`, `price_per_minute`; null: unpriced)',
    options: { org: id },
    required: ['org'],
    run: (e, o) => routes(e).list(str(o, 'org')).then((data) => ({ data })),
  },
  'oauth-client create': {
    summary: '`{client_id, client_secret, permissions}`: the secret is shown this once, only its hash is stored',
    options: { app: id, permissions },
    required: ['app'],
    run: (e, o) => oauthClients(e).create(str(o, 'app'), permissionsOption(o)),
  },
  'oauth-client list': {
    summary: `the application's OAuth clients ${PAGED}: each \`{client_id, application_id, organization_id, revoked, permissions, created_at}\`, never a secret (a page may hold fewer than \`--limit\`, with a \`next_cursor\`)`,
    options: { app: id, ...PAGE_OPTIONS },
    required: ['app'],
    run: (e, o) => oauthClients(e).list(str(o, 'app'), pageOptions(o)),
  },
  'oauth-client revoke': {
    summary: 'the client; its tokens stop working within `CREDENTIAL_CACHE_MS`',
    options: { 'client-id': id },
    required: ['client-id'],
    run: (e, o) => oauthClients(e).revoke(str(o, 'client-id')),
  },
  'publishable-key create': {
    summary: '`{id, key, origins}`: the `apb_…` key may be used only from those origins',
    options: { app: id, origins: { type: 'string', value: 'https://a.example,https://b.example' } },
    required: ['app', 'origins'],
    run: (e, o) => publishableKeys(e).create(str(o, 'app'), originsOption(o)),
  },
  'publishable-key list': {
    summary: `the application's publishable keys ${PAGED}: each \`{id, application_id, organization_id, workspace_id, origins, disabled, last4, created_at}\` (\`last4\`: the key's last 4 characters; a page may hold fewer than \`--limit\`, with a \`next_cursor\`)`,
    options: { app: id, ...PAGE_OPTIONS },
    required: ['app'],
    run: (e, o) => publishableKeys(e).list(str(o, 'app'), pageOptions(o)),
  },
  'publishable-key set-origins': {
    summary: 'the key record with its new `origins` (the whole list, replacing the old one; 1 to 50); a running server applies it within `CREDENTIAL_CACHE_MS`: a removed origin answers `403 origin_not_allowed` and leaves CORS',
    options: { 'key-id': id, origins: { type: 'string', value: 'https://a.example,https://b.example' } },
    required: ['key-id', 'origins'],
    run: (e, o) => publishableKeys(e).setOrigins(str(o, 'key-id'), originsOption(o)),
  },
  'publishable-key disable': {
    summary: 'the key record; it answers `403 key_disabled` and leaves CORS',
    options: { 'key-id': id },
    required: ['key-id'],
    run: (e, o) => publishableKeys(e).disable(str(o, 'key-id')),
  },
  'collection backfill-times': {
    summary:
      '`{records, updated}`: gives every record of a collection created before lists could sort by `created_at` / `updated_at` its place in the time indexes, then lets its lists sort by them (docs/decisions/list-queries.md); run it once every instance runs this version',
    options: { org: id, database: { type: 'string', value: 'KEY' }, collection: name },
    required: ['org', 'database', 'collection'],
    run: (e, o) => backfillTimeKeys(e, str(o, 'org'), str(o, 'database'), str(o, 'collection')),
  },
  ...VECTOR_COMMANDS,
  ...RERANK_COMMANDS,
};

/** A wrong command: what there is instead (the group's commands when the first word is one). */
function unknownCommand(words: string[]): UsageError {
  if (!words.length) return new UsageError(`a command is needed: ${PROGRAM} --help lists them`);
  const group = Object.keys(COMMANDS).filter((n) => n.split(' ')[0] === words[0]);
  const known = group.length ? `${words[0]} commands: ${group.map((n) => n.split(' ')[1]).join(', ')}` : `${PROGRAM} --help lists them`;
  return new UsageError(`unknown command "${words.slice(0, 2).join(' ')}"; ${known}`);
}

const HELP = new Set(['--help', '-h']);

/**
 * The help `argv` asks for, or undefined: `--help` alone or with a group (`key --help`) lists the
 * commands; with a command (`key create --help`), that command's. A wrong command is a UsageError.
 */
export function helpFor(argv: string[]): string | undefined {
  if (!argv.some((a) => HELP.has(a)) && argv[0] !== 'help') return undefined;
  const words = argv.filter((a) => !HELP.has(a) && a !== 'help' && !a.startsWith('-'));
  if (!words.length) return programHelp(COMMANDS);
  const name = words.slice(0, 2).join(' ');
  if (COMMANDS[name]) return commandHelp(name, COMMANDS[name]);
  if (words.length === 1 && Object.keys(COMMANDS).some((n) => n.split(' ')[0] === words[0])) return programHelp(COMMANDS, words[0]);
  throw unknownCommand(words);
}

/**
 * The command `argv` names and its options, checked as a run checks them, without running it (the
 * docs' test parses every documented command with it). `elided`: the line leaves options out (`…`),
 * so required ones are not asked for; the command and the options given still must be right.
 */
export function parseCommand(argv: string[], { elided = false } = {}): { name: string; command: Command; values: Options } {
  const name = argv.slice(0, 2).join(' ');
  const command = COMMANDS[name];
  if (!command) throw unknownCommand(argv);
  const usageOf = `usage: ${usageLine(name, command)} (--help: what each option means)`;
  let values: Options;
  try {
    ({ values } = parseArgs({ args: argv.slice(2), options: command.options, strict: true, allowPositionals: false }));
  } catch (error) {
    throw new UsageError(`${(error as Error).message}\n${usageOf}`);
  }
  if (elided) return { name, command, values };
  const missing = command.required.filter((k) => typeof values[k] !== 'string' || values[k] === '');
  if (missing.length) throw new UsageError(`missing ${missing.map((k) => `--${k}`).join(', ')}\n${usageOf}`);
  if (command.oneOf && command.oneOf.filter((k) => values[k] !== undefined).length !== 1) {
    throw new UsageError(`give either ${command.oneOf.map((k) => `--${k}`).join(' or ')}\n${usageOf}`);
  }
  return { name, command, values };
}

/** Runs one command; returns the JSON result or throws UsageError / a domain error. */
export async function runCommand(engine: Engine, argv: string[]): Promise<unknown> {
  const { command, values } = parseCommand(argv);
  return command.run(engine, values);
}

/** Errors a user can act on (their message says what to do); anything else is reported by its kind and message. */
export const isUserError = (e: unknown): boolean =>
  e instanceof UsageError || e instanceof TenantError || e instanceof ModelRouteError || e instanceof OrgSettingsError || e instanceof AiLimitsError || e instanceof AiKeyRoutesError || e instanceof EventBusAllowListError || e instanceof VectorDatabaseError || e instanceof RerankProfileError || e instanceof PlatformError;
