/** The admin CLI's rerank-profile commands: an organization's rerankers for vector queries. */
import type { Engine } from '../engine/ports.js';
import { Tenants, TenantError } from '../auth/tenants.js';
import { DEFAULT_RERANK_TIMEOUT_MS, MAX_RERANK_TIMEOUT_MS, RerankProfiles } from '../vector/rerank-profiles.js';
import type { Command, Options } from './command.js';

const org = { type: 'string', value: 'ID' } as const;
const profileId = { type: 'string', value: 'NAME' } as const;
const CACHE_NOTE = 'changes reach a running server within `MODEL_ROUTES_CACHE_MS`';

const profiles = (e: Engine) => new RerankProfiles(e.kv, () => e.clock.now());
const str = (o: Options, k: string) => o[k] as string | undefined;

async function existingOrg(e: Engine, o: Options): Promise<string> {
  const id = o.org as string;
  if (!(await new Tenants(e.kv, () => e.clock.now()).getOrganization(id))) throw new TenantError(`no organization ${id}`);
  return id;
}

/** `--timeout-ms`: a whole number, checked with the profile (a text that is no number fails there too). */
const timeoutOption = (o: Options): number | undefined => (o['timeout-ms'] === undefined ? undefined : String(o['timeout-ms']).trim() === '' ? NaN : Number(o['timeout-ms']));

export const RERANK_COMMANDS: Record<string, Command> = {
  'rerank-profile set': {
    summary: `the rerank profile a vector query names in \`rerank_profile\` (created or replaced); ${CACHE_NOTE}`,
    options: {
      org,
      id: { ...profileId, help: '1 to 64 of letters, digits, `_`, `-`, `.`' },
      provider: {
        type: 'string',
        value: 'openai-compatible|bedrock',
        help: '`openai-compatible` POSTs `{model, query, documents, top_n}` to `{base-url}/rerank` (Cohere, Jina, Voyage, vLLM); `bedrock` calls Bedrock\'s Rerank API with the function\'s role',
      },
      'base-url': {
        type: 'string',
        value: 'URL',
        help: 'openai-compatible: required, without `/rerank` (e.g. `https://api.jina.ai/v1`); bedrock: the endpoint, default the region\'s; may not carry credentials',
      },
      model: { type: 'string', value: 'M', help: 'the upstream\'s rerank model; bedrock: the model ARN or id (`amazon.rerank-v1:0`)' },
      'api-key-env': {
        type: 'string',
        value: 'NAME',
        help: 'names the upstream key as `route set` does: an environment variable of `npm start`, a Secrets Manager secret in AWS (never the key itself); not for bedrock',
      },
      'timeout-ms': {
        type: 'string',
        value: 'N',
        help: `the rerank call's deadline, 1 to ${MAX_RERANK_TIMEOUT_MS.toLocaleString('en-US')} (default ${DEFAULT_RERANK_TIMEOUT_MS.toLocaleString('en-US')}); past it the query answers in vector order with \`rerank_timeout\``,
      },
    },
    required: ['org', 'id', 'provider', 'model'],
    run: async (e, o) =>
      profiles(e).set(await existingOrg(e, o), {
        id: o.id as string,
        provider: o.provider as string,
        base_url: str(o, 'base-url'),
        model: str(o, 'model'),
        api_key_env: str(o, 'api-key-env'),
        timeout_ms: timeoutOption(o),
      }),
  },
  'rerank-profile list': {
    summary: '`{data: [profile, …]}`: the organization\'s rerank profiles (key names, never keys)',
    options: { org },
    required: ['org'],
    run: async (e, o) => ({ data: await profiles(e).list(await existingOrg(e, o)) }),
  },
  'rerank-profile delete': {
    summary: `\`{id, deleted: true}\`; a query naming it then answers \`400 invalid_field\` (\`rerank_profile\`); ${CACHE_NOTE}`,
    options: { org, id: profileId },
    required: ['org', 'id'],
    run: async (e, o) => profiles(e).delete(await existingOrg(e, o), o.id as string),
  },
};
