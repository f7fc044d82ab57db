/**
 * Structured one-line JSON logs (CloudWatch in AWS, stderr locally). Silenced with LOG_LEVEL=silent.
 *
 * Every line written while a queue message or a Lambda invocation is handled carries its ids
 * (`request_id`, `operation_id`, `message_id`), set once; the local server's concurrent requests pass
 * theirs explicitly where the chain writes (docs/decisions/request-logs.md).
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { randomUUID } from 'node:crypto';
import { settings } from './settings.js';

export type Level = 'debug' | 'info' | 'warn' | 'error';
const ORDER: Record<Level | 'silent', number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 };

/** The ids a line carries, in snake case as the line's other fields. */
export interface LogContext {
  request_id?: string;
  operation_id?: string;
  message_id?: string;
}

/** Queue consumers' ids (inRequest, withLogIds): never entered by the processes that serve HTTP. */
const current = new AsyncLocalStorage<LogContext>();

/**
 * The ids of the invocation a Lambda function's instance is handling (setInvocationIds): an instance
 * handles one at a time and is frozen between them, so every line until the next one is this one's.
 */
let invocation: LogContext | undefined;

/** Logging must work even when the settings are invalid (it reports that very error). */
function threshold(): Level | 'silent' {
  try {
    return settings().logLevel;
  } catch {
    return 'info';
  }
}

const lineOf = (level: Level, message: string, fields?: Record<string, unknown>) =>
  JSON.stringify({ level, message, time: new Date().toISOString(), ...logContext(), ...fields }) + '\n';

function emit(level: Level, message: string, fields?: Record<string, unknown>) {
  if (ORDER[level] < ORDER[threshold()]) return;
  process.stderr.write(lineOf(level, message, fields));
}

/** Lines of this event-loop turn not yet written (logSoon). */
let soon = '';
/** Past this many characters, the lines are written at once rather than at the end of the turn. */
const SOON_MAX_CHARS = 64 * 1024;

function writeSoon(): void {
  const text = soon;
  soon = '';
  if (text) process.stderr.write(text);
}

/**
 * A line like `log[level]`'s, the same content, written with the other such lines of this event-loop
 * turn in one write at its end (setImmediate) instead of a write of its own: stderr to a file, pipe or
 * terminal is written synchronously, so a line a request (the local server's access line) was a system
 * call on every request's path. Written before the process exits; a SIGKILL loses at most one turn's.
 */
export function logSoon(level: Level, message: string, fields?: Record<string, unknown>): void {
  if (ORDER[level] < ORDER[threshold()]) return;
  const first = soon === '';
  soon += lineOf(level, message, fields);
  if (soon.length > SOON_MAX_CHARS) writeSoon();
  else if (first) setImmediate(writeSoon);
}
process.on('exit', writeSoon);

export const log = {
  debug: (m: string, f?: Record<string, unknown>) => emit('debug', m, f),
  info: (m: string, f?: Record<string, unknown>) => emit('info', m, f),
  warn: (m: string, f?: Record<string, unknown>) => emit('warn', m, f),
  error: (m: string, f?: Record<string, unknown>) => emit('error', m, f),
};

/**
 * Runs `fn` as the handling of one request: every line it writes, through every await, carries
 * `ids`; a missing `request_id` is made up, so a line of a request always names one.
 */
export function inRequest<T>(ids: LogContext, fn: () => T): T {
  return current.run({ ...ids, request_id: ids.request_id || randomUUID() }, fn);
}

/** Runs `fn` with `ids` added to the current request's (a queue message within its invocation). */
export function withLogIds<T>(ids: LogContext, fn: () => T): T {
  return current.run({ ...current.getStore(), ...ids }, fn);
}

/** The current queue message's or Lambda invocation's ids, or undefined (a local HTTP request's are explicit). */
export const logContext = (): Readonly<LogContext> | undefined => current.getStore() ?? invocation;

/**
 * An HTTP route function on Lambda (one invocation at a time, its answer streamed or not): from here every line names
 * `ids` (the same object: ids added to it later, the operation id, show too). The local server serves
 * many requests at once in one process and does not call it: an AsyncLocalStorage would follow each
 * request's async chain, but on Node 20 and 22 it installs a promise hook that costs every promise of
 * the process (measured: 84 against 68 µs of CPU a GET /v1/models, docs/benchmarks.md).
 */
export function setInvocationIds(ids: LogContext | undefined): void {
  invocation = ids;
}

/**
 * Captures the current ids for work that a stream's reader resumes later, outside the request's
 * async chain (a streamed answer's next chunk): `keep(() => work())` runs it under them.
 */
export function keepLogContext(): <T>(fn: () => T) => T {
  // Only a consumer's: a Lambda invocation's ids stay set without it, and a local request has none here.
  const ids = current.getStore();
  return ids ? (fn) => current.run(ids, fn) : (fn) => fn();
}
