/**
 * WebSocket connection gateway for the local server: the server registers each accepted socket under
 * its connection id, and domain code posts to it by id, as it would through the API Gateway Management API.
 * Connection records live in memory: a local connection lives no longer than the process holding it.
 */
import type { Clock, ConnectionGateway, ConnectionRecord } from '../ports.js';
import { systemClock } from '../clock.js';

/** The part of a `ws` WebSocket the gateway uses. */
export interface LocalSocket {
  send(data: string): void;
  close(): void;
  readyState: number;
}

/** WebSocket.OPEN */
const OPEN = 1;

export class LocalConnectionGateway implements ConnectionGateway {
  readonly holdsSockets = true;
  private readonly sockets = new Map<string, LocalSocket>();
  private readonly records = new Map<string, { record: ConnectionRecord; until: number }>();

  constructor(private readonly clock: Clock = systemClock) {}

  register(connectionId: string, socket: LocalSocket): void {
    this.sockets.set(connectionId, socket);
  }

  unregister(connectionId: string): void {
    this.sockets.delete(connectionId);
  }

  /** False for an unknown id or a socket that is no longer open (the id is then forgotten). */
  async post(connectionId: string, data: string): Promise<boolean> {
    const socket = this.sockets.get(connectionId);
    if (!socket) return false;
    if (socket.readyState !== OPEN) {
      this.sockets.delete(connectionId);
      return false;
    }
    try {
      socket.send(data);
      return true;
    } catch {
      this.sockets.delete(connectionId);
      return false;
    }
  }

  /** Closes the socket; an unknown id is not an error. */
  async disconnect(connectionId: string): Promise<void> {
    const socket = this.sockets.get(connectionId);
    this.sockets.delete(connectionId);
    socket?.close();
  }

  async remember(connectionId: string, record: ConnectionRecord, ttlSeconds: number): Promise<void> {
    this.records.set(connectionId, { record: { ...record }, until: this.clock.now() + ttlSeconds * 1000 });
  }

  async recall(connectionId: string): Promise<ConnectionRecord | undefined> {
    const hit = this.records.get(connectionId);
    if (hit && hit.until <= this.clock.now()) this.records.delete(connectionId);
    return hit && hit.until > this.clock.now() ? { ...hit.record } : undefined;
  }

  async forget(connectionId: string): Promise<void> {
    this.records.delete(connectionId);
  }
}
