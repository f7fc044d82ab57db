/**
 * What the API documents say of one route beyond the route table (docs/openapi.md): its words, the zod
 * schemas of what it takes and answers (each written once, beside the domain code that parses or shapes
 * it), and the error codes of its own. The route table gives the method, path, credentials, capability,
 * body limit and content kind; lambdas/openapi/common.ts adds the errors every route of a kind answers.
 */
import type * as z from 'zod/mini';
import type { ErrorCode } from '../shared/errors.js';

/** A zod schema, built at its first use (the domain modules export them as `onFirstUse` functions). */
export type SchemaRef = () => z.core.$ZodType;

export interface ParameterDoc {
  description?: string;
  /** A zod schema of the value (a string in the path or query before any coercion). */
  schema: SchemaRef;
  example?: unknown;
}

export interface HeaderDoc {
  description: string;
  required?: boolean;
  schema?: SchemaRef;
}

export interface ContentDoc {
  /** The JSON schema's component name (a type name in generated clients: `Record`, `Subscription`). */
  name?: string;
  schema?: SchemaRef;
  /** `application/json` unless said: `text/event-stream` (streamed answers), `application/octet-stream` (raw bytes). */
  contentType?: string;
  /** An example that validates against `schema` (a test checks it). */
  example?: unknown;
}

export interface ResponseDoc extends ContentDoc {
  description: string;
  /** Answer headers beyond the ones every answer of the API carries. */
  headers?: Record<string, HeaderDoc>;
  /** Other media types the same status may answer with (a streamed chat: JSON or `text/event-stream`). */
  alternatives?: ContentDoc[];
}

export interface OperationDoc {
  summary: string;
  description?: string;
  /** OpenAPI tag (a group in the rendered docs): `Records`, `Subscriptions`. */
  tag: string;
  /** Beyond the spec's own routes (section 4): `x-extension: true` in the document. */
  extension?: boolean;
  /** Path parameters by name; a name the path has and this lacks is a plain string. */
  path?: Record<string, ParameterDoc>;
  /**
   * The query as one zod object schema (the parse functions' own), its properties become parameters;
   * `style: deepObject` parameters (`filter[field][op]`) are described in `queryExtra`.
   */
  query?: SchemaRef;
  /** Query parameters a schema cannot name (patterns such as `filter[<field>]`). */
  queryExtra?: Record<string, ParameterDoc>;
  /** Request headers of this route (If-Match, If-None-Match, Idempotency-Key, Content-Length, …). */
  headers?: Record<string, HeaderDoc>;
  /** The request body (JSON unless `contentType` says otherwise). */
  body?: ContentDoc & { description?: string; required?: boolean; alternatives?: ContentDoc[] };
  /** Success answers by status. */
  responses: Record<number, ResponseDoc>;
  /** The codes of this route's own faults; common.ts adds those of credentials, bodies, limits and outages. */
  errors: readonly ErrorCode[];
}

/** Operation docs of one API, by route id (`data.records.create`). */
export type OperationDocs = Readonly<Record<string, OperationDoc>>;
