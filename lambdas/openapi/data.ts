/** The Data API's routes as the document describes them (spec 4.11 to 4.20 and the extensions). */
import * as z from 'zod/mini';
import { databaseListSchema, databaseViewSchema } from '../data/databases.js';
import type { OperationDocs, ParameterDoc } from './operation.js';
import { OAUTH_TOKEN_DOC } from './oauth.js';

/** Path parameters the Data routes share. */
export const DATABASE_PARAM: ParameterDoc = {
  description: 'The database key: lowercase letters, digits, `.`, `_`, `-`, and `/` written `%2F`, up to 128 characters.',
  schema: () => z.string().check(z.minLength(1), z.maxLength(384)),
  example: 'shop',
};

export const DATA_OPERATIONS: OperationDocs = {
  'data.oauth.token': OAUTH_TOKEN_DOC,
  'data.databases.list': {
    tag: 'Databases',
    summary: 'List databases',
    description: 'An application-bound credential lists only the databases its application created (each with `application_id`); an organization credential lists all.',
    responses: { 200: { description: 'The databases.', name: 'DatabaseList', schema: databaseListSchema, example: { databases: [{ key: 'shop', created_at: '2026-12-01T10:00:00.000Z' }] } } },
    errors: [],
  },
  'data.databases.put': {
    tag: 'Databases',
    summary: 'Create a database',
    description: 'Idempotent: 201 when created, 200 when it already exists. An application-bound credential makes its application the owner.',
    path: { database: DATABASE_PARAM },
    responses: {
      201: { description: 'Created.', name: 'Database', schema: databaseViewSchema, example: { key: 'shop', created_at: '2026-12-01T10:00:00.000Z' } },
      200: { description: 'It already existed.', name: 'Database', schema: databaseViewSchema },
    },
    errors: ['invalid_name'],
  },
};
