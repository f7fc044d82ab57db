/**
 * The same work bought from a hosted peer, at its public prices (prices.ts PEERS), beside what the
 * stack's own routes cost for it.
 */
import { PEERS, PRICES } from './prices.js';

export interface PeerRow {
  work: string;
  ours: string;
  peer: string;
  peerUsd: string;
}

const usd = (n: number) => `$${n.toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 })}`;

/** A million vectors of 1,024 float32 dimensions with a little metadata: about 4.2 GB. */
const VECTOR_GB = (1e6 * (1024 * 4 + 100)) / 1e9;

export interface OurFigures {
  /** USD per million: publish plus delivery of one event to one webhook. */
  webhookEvent: number;
  /** USD per million non-streamed chat completions (the model excluded). */
  chatCall: number;
  /** USD per million reads of one record, standing in for a vector query route's own function and API. */
  simpleRoute: number;
}

export function peerRows(ours: OurFigures): PeerRow[] {
  const svix = PEERS.svix.usd + (1e6 - PEERS.svix.included) * PEERS.svix.overagePerCall;
  const portkey = PEERS.portkey.usd + ((1e6 - PEERS.portkey.included) / 100_000) * PEERS.portkey.overagePer100k;
  const s3Vectors = VECTOR_GB * PRICES.s3VectorsStorageGbMonth.usd + 1e6 * PRICES.s3VectorsQuery.usd;
  const pinecone = Math.max(PEERS.pinecone.usd, VECTOR_GB * PEERS.pinecone.storageGbMonth + 1e6 * PEERS.pinecone.readUnitUsd);
  return [
    {
      work: 'a million webhook deliveries (one event, one endpoint each) in a month',
      ours: `${usd(ours.webhookEvent)} (publish + delivery, above)`,
      peer: 'Svix Professional: $490 a month with 50,000 messages, then $0.0001 a message',
      peerUsd: usd(svix),
    },
    {
      work: 'the same, on Hookdeck',
      ours: usd(ours.webhookEvent),
      peer: 'Hookdeck Team: from $39 a month with 10,000 events, metered beyond (rate not read); an inbound gateway, its outbound product is Outpost',
      peerUsd: `more than ${usd(PEERS.hookdeck.usd)}`,
    },
    {
      work: `a vector index of a million 1,024-dimension vectors (${VECTOR_GB.toFixed(1)} GB) and a million queries in a month (projection)`,
      ours: `${usd(s3Vectors + ours.simpleRoute)}: S3 Vectors storage and query calls ${usd(s3Vectors)} plus its data-processed charge (not modelled), plus the route (${usd(ours.simpleRoute)}, as a record get)`,
      peer: 'Pinecone Standard serverless: $0.33 a GB-month, $16 a million read units (a query reads at least one), $50 a month minimum',
      peerUsd: `at least ${usd(pinecone)}`,
    },
    {
      work: 'a million chat completions through an LLM gateway (the model billed apart)',
      ours: `${usd(ours.chatCall)} (above)`,
      peer: 'Portkey Production: $49 a month with 100,000 requests logged, then $9 per 100,000',
      peerUsd: usd(portkey),
    },
    {
      work: 'the same, on LiteLLM',
      ours: usd(ours.chatCall),
      peer: 'LiteLLM Enterprise: priced per contract, no public per-request fee (the open-source proxy has none, you host it)',
      peerUsd: 'not published',
    },
  ];
}
