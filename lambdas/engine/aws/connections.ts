/** WebSocket connection gateway on the API Gateway Management API (the client targets the stage's https endpoint). */
import { DeleteConnectionCommand, PostToConnectionCommand, type ApiGatewayManagementApiClient } from '@aws-sdk/client-apigatewaymanagementapi';
import type { ConnectionGateway } from '../ports.js';
import { callAws, isGone } from './errors.js';

export class ApiGatewayConnectionGateway implements ConnectionGateway {
  private readonly encoder = new TextEncoder();

  constructor(private readonly client: ApiGatewayManagementApiClient) {}

  /** False when the connection is gone (GoneException). */
  async post(connectionId: string, data: string): Promise<boolean> {
    try {
      await callAws('API Gateway PostToConnection', () =>
        this.client.send(new PostToConnectionCommand({ ConnectionId: connectionId, Data: this.encoder.encode(data) })),
      );
      return true;
    } catch (error) {
      if (isGone(error)) return false;
      throw error;
    }
  }

  /** A connection already gone is not an error. */
  async disconnect(connectionId: string): Promise<void> {
    try {
      await callAws('API Gateway DeleteConnection', () => this.client.send(new DeleteConnectionCommand({ ConnectionId: connectionId })));
    } catch (error) {
      if (isGone(error)) return;
      throw error;
    }
  }
}
