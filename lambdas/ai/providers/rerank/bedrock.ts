/**
 * Rerank provider `bedrock`: Amazon Bedrock's Rerank API (Bedrock Agent Runtime `Rerank`), with the
 * function's role (no API key). The profile's model is a reranking model's ARN or its id
 * (`amazon.rerank-v1:0`, `cohere.rerank-v3-5:0`), made an ARN in the client's region; its base URL,
 * when set, is the endpoint (its region read from the host name when it is an AWS one).
 */
import { BedrockAgentRuntimeClient, RerankCommand } from '@aws-sdk/client-bedrock-agent-runtime';
import { checkedResults, RerankFailure, type Reranker } from './types.js';

/** One client per endpoint per process (the region's own under the key ''). */
const clients = new Map<string, BedrockAgentRuntimeClient>();

const REGION_IN_HOST = /\.([a-z]{2}(?:-[a-z]+)+-\d+)\.amazonaws\.com(?:\.cn)?$/;

export function bedrockRerankClient(endpoint: string | null): BedrockAgentRuntimeClient {
  const key = endpoint ?? '';
  let client = clients.get(key);
  if (!client) {
    const region = endpoint ? REGION_IN_HOST.exec(new URL(endpoint).hostname)?.[1] : undefined;
    client = new BedrockAgentRuntimeClient(endpoint ? { endpoint, ...(region ? { region } : {}) } : {});
    clients.set(key, client);
  }
  return client;
}

const partitionOf = (region: string) => (region.startsWith('cn-') ? 'aws-cn' : region.startsWith('us-gov-') ? 'aws-us-gov' : 'aws');

/** The model ARN Rerank wants: the profile's when it is one, else the foundation model's in the client's region. */
export async function modelArnOf(client: BedrockAgentRuntimeClient, model: string): Promise<string> {
  if (model.startsWith('arn:')) return model;
  const region = await client.config.region();
  return `arn:${partitionOf(region)}:bedrock:${region}::foundation-model/${model}`;
}

export const bedrockReranker: Reranker = async (request) => {
  const client = bedrockRerankClient(request.baseUrl);
  let out;
  try {
    const modelArn = await modelArnOf(client, request.model);
    out = await client.send(
      new RerankCommand({
        queries: [{ type: 'TEXT', textQuery: { text: request.query } }],
        sources: request.documents.map((text) => ({ type: 'INLINE', inlineDocumentSource: { type: 'TEXT', textDocument: { text } } })),
        rerankingConfiguration: { type: 'BEDROCK_RERANKING_MODEL', bedrockRerankingConfiguration: { numberOfResults: request.topN, modelConfiguration: { modelArn } } },
      }),
      { abortSignal: request.signal },
    );
  } catch (error) {
    if (request.signal.aborted) throw error;
    // The SDK's error name says what went wrong (ThrottlingException, ValidationException, AccessDeniedException…);
    // its message may quote the request, so it stays out of the reason.
    const e = error as { name?: string; $metadata?: { httpStatusCode?: number } };
    throw new RerankFailure(`Bedrock answered ${e.name ?? 'an error'}${e.$metadata?.httpStatusCode ? ` (${e.$metadata.httpStatusCode})` : ''}`);
  }
  return { results: checkedResults(out.results, request.documents.length, request.topN, 'relevanceScore'), tokens: null };
};
