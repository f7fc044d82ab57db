import * as z from 'zod/mini';
import { workspaceHandler } from '../../handler.js';
import { createVectorDatabase } from '../../../vector/databases.js';
import { PlatformError } from '../../../shared/errors.js';
import { settings } from '../../../shared/settings.js';
import { body } from './shared.js';
import { adminCall } from './owned.js';

const Create = z.strictObject({ embedding_route: z.string().check(z.minLength(1), z.maxLength(128)) });

/**
 * POST /console/api/workspaces/{workspace_id}/vector-database `{embedding_route}` → 201 the database,
 * as `vector-db create` makes it (one embeddings call, charged, learns its dimensions).
 */
export const handler = workspaceHandler('console.vector-database.create', async (req, { engine, workspace }) => {
  const { embedding_route } = body(Create, req);
  // As the CLI: on AWS the index goes to the stack's vector bucket, refused before the (charged) embeddings call.
  if (engine.name === 'aws' && settings().vectorBucketName === undefined) throw new PlatformError('service_unavailable', 'The vector bucket is not configured for this deployment.');
  const database = await adminCall(() => createVectorDatabase(engine, workspace.id, embedding_route));
  const { index: _index, ...shown } = database;
  return { status: 201, body: shown };
});
