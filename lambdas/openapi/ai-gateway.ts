/** The AI API's gateway routes (spec 4.2 to 4.5): models, chat completions, embeddings, runs, and its OAuth token route. */
import * as z from 'zod/mini';
import { chatRequestBodySchema } from '../ai/chat.js';
import { embeddingListSchema, embeddingsRequestSchema } from '../ai/embeddings.js';
import { modelListSchema } from '../ai/model-routes.js';
import { runRequestSchema, runResultSchema } from '../ai/run.js';
import { chatCompletionChunkSchema, chatCompletionSchema } from '../ai/types.js';
import type { ErrorCode } from '../shared/errors.js';
import type { HeaderDoc, OperationDocs } from './operation.js';
import { OAUTH_TOKEN_DOC } from './oauth.js';

/** Spec 4.1: a write's kept answer, replayed. */
const REPLAY_HEADER: Record<string, HeaderDoc> = {
  'x-idempotent-replay': { description: '`true` when this is the kept answer of an earlier call with the same operation id (kept 24 hours, whatever the new body says).', schema: () => z.literal('true') },
};

/** docs/decisions/operation-ids-optional.md */
const IDEMPOTENCY_KEY: Record<string, HeaderDoc> = {
  'Idempotency-Key': {
    // No pattern: where it is ignored, any value is.
    description:
      'Taken as the operation id when the organization made operation ids optional and no `X-Operation-Id` is sent: then 8 to 128 letters, digits, `_`, `-` (else `400 invalid_operation_id`); ignored otherwise, whatever it holds. Without either header, such an organization’s call runs every time and is never replayed.',
  },
};

/** What every upstream call can answer (spec 4.3 to 4.5): the operation id's claim, the key's route list, the limits, the upstream. */
export const CALL_ERRORS: readonly ErrorCode[] = [
  'model_not_allowed',
  'input_too_large',
  'route_forbidden',
  'operation_in_progress',
  'operation_id_reused',
  'rate_limited',
  'quota_exceeded',
  'concurrency_limited',
  'budget_exhausted',
  'upstream_error',
  'route_unavailable',
  'timeout_error',
];

const COMPLETION_EXAMPLE = {
  id: 'chatcmpl-9f2c',
  object: 'chat.completion',
  created: 1_796_119_200,
  model: 'chat-default',
  choices: [{ index: 0, message: { role: 'assistant', content: 'Paris.' }, finish_reason: 'stop', logprobs: null }],
  usage: { prompt_tokens: 14, completion_tokens: 2, total_tokens: 16 },
  system_fingerprint: 'fp_44709d6fcb',
};

export const AI_GATEWAY_OPERATIONS: OperationDocs = {
  'ai.oauth.token': OAUTH_TOKEN_DOC,

  'ai.models.list': {
    tag: 'Model routes',
    summary: 'List model routes',
    description:
      'The routes enabled for the organization (a key with a route list of its own sees only those), each sent as `model` to the endpoint it names. Changes nothing, not charged.',
    responses: {
      200: {
        description: 'The routes.',
        name: 'ModelList',
        schema: modelListSchema,
        example: {
          object: 'list',
          data: [
            { id: 'chat-default', object: 'model', created: 1_796_119_200, owned_by: 'acme', endpoint: '/v1/chat/completions' },
            { id: 'embed-small', object: 'model', created: 1_796_119_200, owned_by: 'acme', endpoint: '/v1/embeddings' },
          ],
        },
      },
    },
    errors: [],
  },

  'ai.chat.completions': {
    tag: 'Chat',
    summary: 'Create a chat completion',
    description:
      "OpenAI's chat completions format over the organization's model routes: `model` names a route, whose upstream model answers. `max_tokens` and `max_completion_tokens` only lower the route's ceiling; `user`, `safety_identifier` and `prompt_cache_key` are replaced by values derived from the organization. A reused operation id answers the kept answer whatever the new body says. `stream: true` answers server-sent events (`text/event-stream`) instead, never kept: a failure before the first chunk answers its status as JSON, one after it is an error event.",
    headers: IDEMPOTENCY_KEY,
    body: {
      name: 'ChatCompletionRequest',
      schema: chatRequestBodySchema,
      example: { model: 'chat-default', messages: [{ role: 'system', content: 'Answer in one word.' }, { role: 'user', content: 'The capital of France?' }], max_tokens: 50 },
    },
    responses: {
      200: {
        description:
          'The completion (`stream` absent or false), or with `stream: true` server-sent events: one `data: <ChatCompletionChunk>` event a chunk as the upstream sends it, then `data: [DONE]`; a failure part-way is one `data: {"error": {...}}` event and no `[DONE]`. An operation id whose non-streamed answer is kept replays that answer as JSON.',
        name: 'ChatCompletion',
        schema: chatCompletionSchema,
        example: COMPLETION_EXAMPLE,
        headers: REPLAY_HEADER,
        alternatives: [
          {
            contentType: 'text/event-stream',
            name: 'ChatCompletionChunk',
            schema: chatCompletionChunkSchema,
            example: { id: 'chatcmpl-9f2c', object: 'chat.completion.chunk', created: 1_796_119_200, model: 'chat-default', choices: [{ index: 0, delta: { role: 'assistant', content: 'Par' }, finish_reason: null }] },
          },
        ],
      },
    },
    errors: ['invalid_messages', 'unsupported_field_for_route', 'field_not_allowed', 'capability_not_enabled', ...CALL_ERRORS],
  },

  'ai.embeddings': {
    tag: 'Embeddings',
    summary: 'Create embeddings',
    description:
      "One vector per input string, in input order, from the embeddings route `model` names. The upstream is always asked for floats; `encoding_format: base64` is answered as OpenAI does. A reused operation id answers the kept answer whatever the new body says.",
    headers: IDEMPOTENCY_KEY,
    body: { name: 'EmbeddingsRequest', schema: embeddingsRequestSchema, example: { model: 'embed-small', input: ['red apples', 'green pears'] } },
    responses: {
      200: {
        description: 'The vectors.',
        name: 'EmbeddingList',
        schema: embeddingListSchema,
        headers: REPLAY_HEADER,
        example: {
          object: 'list',
          data: [
            { object: 'embedding', index: 0, embedding: [0.0123, -0.0456, 0.0789] },
            { object: 'embedding', index: 1, embedding: [0.0231, -0.0112, 0.0654] },
          ],
          model: 'embed-small',
          usage: { prompt_tokens: 4, total_tokens: 4 },
        },
      },
    },
    errors: ['capability_not_enabled', ...CALL_ERRORS],
  },

  'ai.run': {
    tag: 'Runs',
    summary: 'Run a generic or decision route',
    description:
      "The route `model` names picks the variant. A generic run route (provider `http`): `input`, any JSON object, is forwarded unchanged and the upstream's JSON (object or array) is the answer. A decision route: every question about `input.state` is asked of the route's first tier in one call and answered with probabilities; with `escalate`, the doubtful ones are asked again on stronger tiers. A decision run needs the `decision` capability of an application-bound key. A reused operation id answers the kept answer whatever the new body says.",
    headers: IDEMPOTENCY_KEY,
    body: {
      name: 'RunRequest',
      schema: runRequestSchema,
      example: {
        model: 'judge',
        input: {
          state: { review: 'Arrived broken, and support never answered.' },
          questions: {
            refund: { type: 'noul', instructions: 'Does the customer ask for a refund?' },
            mood: { type: 'score', instructions: 'How satisfied is the customer?', criteria: ['angry', 'unhappy', 'neutral', 'happy'] },
          },
        },
        escalate: { min_confidence: 0.8 },
      },
    },
    responses: {
      200: {
        description: "A decision route's result, or a generic route's output: the upstream's JSON object or array as it answered it.",
        name: 'RunResult',
        schema: runResultSchema,
        headers: REPLAY_HEADER,
        example: {
          model: 'judge',
          result: {
            answers: {
              refund: { type: 'noul', noul: 0.12, confidence: 0.88 },
              mood: { type: 'score', score: 0.31, confidence: 0.72, legend: { '0': 'angry', '1': 'unhappy', '2': 'neutral', '3': 'happy' }, probabilities: { '0': 0.72, '1': 0.25, '2': 0.03, '3': 0 } },
            },
            usage: { input_tokens: 412, output_tokens: 38 },
          },
          state: 'Completed',
          engine: { tier: 'judge-small', latency_ms: 840 },
        },
      },
    },
    errors: ['invalid_input', 'invalid_decision_input', 'invalid_escalate', 'capability_not_enabled', ...CALL_ERRORS],
  },
};
