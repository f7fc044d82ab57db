/** The one DynamoDB table's key schema, shared by the AWS adapter and the CDK stack. */
export const TABLE_SCHEMA = {
  partitionKey: 'pk',
  sortKey: 'sk',
  /** Generic global secondary indexes: index name -> its partition and sort key attributes (strings). */
  indexes: {
    gsi1: { partitionKey: 'gsi1pk', sortKey: 'gsi1sk' },
    gsi2: { partitionKey: 'gsi2pk', sortKey: 'gsi2sk' },
  },
  /** TTL attribute, Unix seconds. */
  ttlAttribute: 'expires_at',
} as const;

/** The WebSocket connection table (ConnectionGateway in connections.ts): one item per open connection. */
export const CONNECTION_TABLE_SCHEMA = { partitionKey: 'connection_id', ttlAttribute: 'expires_at' } as const;
