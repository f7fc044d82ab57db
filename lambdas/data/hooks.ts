/**
 * The Data API's after-commit events: a record created, updated or deleted, a file stored, read or
 * deleted. Services fire them once the write has committed; the activity log binds to them
 * (http/hook-bindings.ts). The Events API's platform events go through an outbox in the write's own
 * transaction instead (change-outbox.ts), so a crash cannot lose them.
 */
import type { Engine } from '../engine/ports.js';
import type { Principal } from '../auth/principal.js';
import type { CallInfo } from '../shared/api.js';
import { Hooks } from '../shared/hooks.js';

/** What a Data service runs with: plain values, no HTTP. `call` names the API call, when there is one. */
export interface DataScope {
  engine: Engine;
  principal: Principal;
  call?: CallInfo;
}

export type RecordHookEvent = {
  type: 'record.created' | 'record.updated' | 'record.deleted';
  database: string;
  collection: string;
  recordId: string;
  /** The version written; for a delete, the version the caller named (If-Match, batch `version`), else null. */
  version: number | null;
};

export type FileHookEvent = {
  type: 'file.created' | 'file.read' | 'file.deleted';
  database: string;
  sha256: string;
  size: number;
  contentType: string | null;
};

export type DataHookEvent = RecordHookEvent | FileHookEvent;

export const dataHooks = new Hooks<DataHookEvent, DataScope>('data');
