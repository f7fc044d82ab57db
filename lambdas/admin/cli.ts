/**
 * The admin CLI: one JSON document on stdout per command, errors on stderr with a non-zero exit.
 * It acts on the engine the environment selects (DATA_DIR for the embedded one, ENGINE=aws for AWS).
 */
import { parseArgs } from 'node:util';
import type { Engine } from '../engine/ports.js';
import { Tenants, TenantError } from '../auth/tenants.js';
import type { Capability } from '../auth/principal.js';
import { ModelRouteError, ModelRoutes } from '../ai/model-routes.js';
import { AiOrgSettings, OrgSettingsError, type AiLimits } from '../ai/org-settings.js';
import { AiKeyLimits, AiLimitsError, budgetState, checkLimits, keyScope, orgScope } from '../ai/limits.js';
import { AiKeyRoutes, AiKeyRoutesError } from '../ai/key-routes.js';
import { OAuthClients } from '../auth/oauth-clients.js';
import { PublishableKeys } from '../auth/publishable-keys.js';
import { EVENTS_PERMISSIONS, unknownPermissions } from '../auth/permissions.js';
import { EventBusAllowListError, allowEventBus, listEventBuses, revokeEventBus } from '../events/eventbridge.js';

export class UsageError extends Error {
  override name = 'UsageError';
}

type Options = Record<string, string | boolean | undefined>;

interface Command {
  usage: string;
  options: Record<string, { type: 'string' | 'boolean' }>;
  required: string[];
  run(engine: Engine, o: Options): Promise<unknown>;
}

const s = { type: 'string' } as const;
const b = { type: 'boolean' } as const;
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
  const value = Number(o[name]);
  if (String(o[name]).trim() === '' || !Number.isFinite(value)) throw new UsageError(`--${name} takes a number, got "${String(o[name])}"`);
  return value;
}

const aiSettings = (e: Engine) => new AiOrgSettings(e.kv, () => e.clock.now());

async function existingOrg(e: Engine, o: Options): Promise<string> {
  const id = str(o, 'org');
  if (!(await tenants(e).getOrganization(id))) throw new TenantError(`no organization ${id}`);
  return id;
}

const LIMIT_OPTIONS = { rpm: 'rpm', tpm: 'tpm', concurrency: 'concurrency', 'budget-usd': 'budget_usd' } as const;
const LIMITS_USAGE = '[--rpm N] [--tpm N] [--concurrency N] [--budget-usd X] (none lifts a limit)';

/** `--rpm 60 --budget-usd none`: the limits to set; `none` lifts one (null), an absent option leaves it. */
function limitsOptions(o: Options): Partial<AiLimits> {
  const limits: Partial<AiLimits> = {};
  for (const [option, field] of Object.entries(LIMIT_OPTIONS)) {
    if (o[option] === undefined) continue;
    limits[field] = String(o[option]).trim().toLowerCase() === 'none' ? null : (numberOption(o, option) as number);
  }
  return checkLimits(limits);
}

export const COMMANDS: Record<string, Command> = {
  'org create': { usage: '--name N', options: { name: s }, required: ['name'], run: (e, o) => tenants(e).createOrganization(str(o, 'name')) },
  'org disable': { usage: '--org ID', options: { org: s }, required: ['org'], run: (e, o) => tenants(e).setOrganizationDisabled(str(o, 'org'), true) },
  'org enable': { usage: '--org ID', options: { org: s }, required: ['org'], run: (e, o) => tenants(e).setOrganizationDisabled(str(o, 'org'), false) },
  'org grant-field': {
    usage: '--org ID --field NAME',
    options: { org: s, field: s },
    required: ['org', 'field'],
    run: async (e, o) => aiSettings(e).grantField(await existingOrg(e, o), str(o, 'field')),
  },
  'org revoke-field': {
    usage: '--org ID --field NAME',
    options: { org: s, field: s },
    required: ['org', 'field'],
    run: async (e, o) => aiSettings(e).revokeField(await existingOrg(e, o), str(o, 'field')),
  },
  // The event buses the organization's eventbridge subscriptions may deliver to (docs/events/eventbridge.md).
  'org eventbridge-allow': {
    usage: '--org ID --arn EVENT_BUS_ARN',
    options: { org: s, arn: s },
    required: ['org', 'arn'],
    run: async (e, o) => allowEventBus(e, await existingOrg(e, o), str(o, 'arn')),
  },
  'org eventbridge-revoke': {
    usage: '--org ID --arn EVENT_BUS_ARN',
    options: { org: s, arn: s },
    required: ['org', 'arn'],
    run: async (e, o) => revokeEventBus(e, await existingOrg(e, o), str(o, 'arn')),
  },
  'org eventbridge-list': {
    usage: '--org ID',
    options: { org: s },
    required: ['org'],
    run: async (e, o) => ({ data: await listEventBuses(e, await existingOrg(e, o)) }),
  },
  'org limits': {
    usage: `--org ID ${LIMITS_USAGE}`,
    options: { org: s, rpm: s, tpm: s, concurrency: s, 'budget-usd': s },
    required: ['org'],
    run: async (e, o) => {
      const org = await existingOrg(e, o);
      const limits = limitsOptions(o);
      const settings = Object.keys(limits).length ? await aiSettings(e).setLimits(org, limits) : await aiSettings(e).get(org);
      return { ...settings, budget: await budgetState(e.kv, orgScope(org), e.clock.now()) };
    },
  },
  // Whether the organization's AI writes need X-Operation-Id (docs/decisions/operation-ids-optional.md).
  'org settings': {
    usage: '--org ID [--operation-ids required|optional]',
    options: { org: s, 'operation-ids': s },
    required: ['org'],
    run: async (e, o) => {
      const org = await existingOrg(e, o);
      return o['operation-ids'] === undefined ? aiSettings(e).get(org) : aiSettings(e).setOperationIds(org, str(o, 'operation-ids'));
    },
  },
  'workspace create': {
    usage: '--org ID --name N',
    options: { org: s, name: s },
    required: ['org', 'name'],
    run: (e, o) => tenants(e).createWorkspace(str(o, 'org'), str(o, 'name')),
  },
  'app create': {
    usage: '--workspace ID --name N [--capabilities a,b]',
    options: { workspace: s, name: s, capabilities: s },
    required: ['workspace', 'name'],
    run: (e, o) =>
      tenants(e).createApplication(
        str(o, 'workspace'),
        str(o, 'name'),
        (str(o, 'capabilities') ?? '').split(',').map((c) => c.trim()).filter(Boolean) as Capability[],
      ),
  },
  'key create': {
    usage: '--org ID [--app ID] [--permissions events:event.publish,...]',
    options: { org: s, app: s, permissions: s },
    required: ['org'],
    run: async (e, o) => {
      const { id, key, record } = await tenants(e).createSecretKey(str(o, 'org'), str(o, 'app'), permissionsOption(o));
      // permissions: null is every Events permission (docs/events/permissions.md).
      return { id, key, permissions: record.permissions };
    },
  },
  'key disable': { usage: '--key-id ID', options: { 'key-id': s }, required: ['key-id'], run: (e, o) => tenants(e).setSecretKeyDisabled(str(o, 'key-id'), true) },
  'key enable': { usage: '--key-id ID', options: { 'key-id': s }, required: ['key-id'], run: (e, o) => tenants(e).setSecretKeyDisabled(str(o, 'key-id'), false) },
  'key limits': {
    usage: `--key-id ID ${LIMITS_USAGE}`,
    options: { 'key-id': s, rpm: s, tpm: s, concurrency: s, 'budget-usd': s },
    required: ['key-id'],
    run: async (e, o) => {
      const keyId = str(o, 'key-id');
      const set = await new AiKeyLimits(e.kv, () => e.clock.now()).set(keyId, limitsOptions(o));
      return { ...set, budget: await budgetState(e.kv, keyScope(keyId), e.clock.now()) };
    },
  },
  'key routes': {
    usage: '--key-id ID (--routes a,b | --all)',
    options: { 'key-id': s, routes: s, all: b },
    required: ['key-id'],
    run: async (e, o) => {
      const list = str(o, 'routes');
      if ((list === undefined) === !o.all) throw new UsageError('give either --routes a,b or --all');
      return new AiKeyRoutes(e.kv, () => e.clock.now()).set(str(o, 'key-id'), o.all ? null : list!.split(',').map((r) => r.trim()));
    },
  },
  'route set': {
    usage:
      '--org ID --id ROUTE --endpoint PATH --provider openai-compatible|bedrock|http|decision [--base-url URL] [--model UPSTREAM_MODEL] [--default] [--max-tokens N] [--no-tools] [--timeout-ms N] [--tiers a,b] [--price-in-per-mtok X] [--price-out-per-mtok X] [--api-key-env NAME] [--max-answer-bytes N] [--max-event-bytes N]',
    options: {
      org: s, id: s, endpoint: s, provider: s, 'base-url': s, model: s, default: b,
      'max-tokens': s, 'no-tools': b, 'timeout-ms': s, tiers: s, 'price-in-per-mtok': s, 'price-out-per-mtok': s, 'api-key-env': s,
      'max-answer-bytes': s, 'max-event-bytes': s,
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
        price_in_per_mtok: numberOption(o, 'price-in-per-mtok'),
        price_out_per_mtok: numberOption(o, 'price-out-per-mtok'),
        api_key_env: str(o, 'api-key-env'),
        max_answer_bytes: numberOption(o, 'max-answer-bytes'),
        max_event_bytes: numberOption(o, 'max-event-bytes'),
      });
    },
  },
  'oauth-client create': {
    usage: '--app ID [--permissions events:event.publish,...]',
    options: { app: s, permissions: s },
    required: ['app'],
    run: (e, o) => new OAuthClients(e.kv, () => e.clock.now()).create(str(o, 'app'), permissionsOption(o)),
  },
  'oauth-client revoke': {
    usage: '--client-id ID',
    options: { 'client-id': s },
    required: ['client-id'],
    run: (e, o) => new OAuthClients(e.kv, () => e.clock.now()).revoke(str(o, 'client-id')),
  },
  'publishable-key create': {
    usage: '--app ID --origins https://a.example,https://b.example',
    options: { app: s, origins: s },
    required: ['app', 'origins'],
    run: (e, o) =>
      new PublishableKeys(e.kv, () => e.clock.now()).create(
        str(o, 'app'),
        str(o, 'origins').split(',').map((x) => x.trim()).filter(Boolean),
      ),
  },
  'publishable-key disable': {
    usage: '--key-id ID',
    options: { 'key-id': s },
    required: ['key-id'],
    run: (e, o) => new PublishableKeys(e.kv, () => e.clock.now()).disable(str(o, 'key-id')),
  },
  'route list': { usage: '--org ID', options: { org: s }, required: ['org'], run: (e, o) => routes(e).list(str(o, 'org')).then((data) => ({ data })) },
};

export function usage(): string {
  return ['usage: npm run --silent admin -- <command>', ...Object.entries(COMMANDS).map(([name, c]) => `  ${name} ${c.usage}`)].join('\n');
}

/** Runs one command; returns the JSON result or throws UsageError / a domain error. */
export async function runCommand(engine: Engine, argv: string[]): Promise<unknown> {
  const name = argv.slice(0, 2).join(' ');
  const command = COMMANDS[name];
  if (!command) throw new UsageError(`unknown command "${name}"\n${usage()}`);
  let values: Options;
  try {
    ({ values } = parseArgs({ args: argv.slice(2), options: command.options, strict: true, allowPositionals: false }));
  } catch (error) {
    throw new UsageError(`${(error as Error).message}\nusage: ${name} ${command.usage}`);
  }
  const missing = command.required.filter((k) => typeof values[k] !== 'string' || values[k] === '');
  if (missing.length) throw new UsageError(`missing ${missing.map((k) => `--${k}`).join(', ')}\nusage: ${name} ${command.usage}`);
  return command.run(engine, values);
}

/** Errors a user can act on; anything else is a bug and keeps its stack on stderr. */
export const isUserError = (e: unknown) =>
  e instanceof UsageError || e instanceof TenantError || e instanceof ModelRouteError || e instanceof OrgSettingsError || e instanceof AiLimitsError || e instanceof AiKeyRoutesError || e instanceof EventBusAllowListError;
