// Runs one Lambda bundle as the Node.js runtime would (test/helpers/lambda-bundles.ts runAlone):
// `node lambda-runner.mjs JOB` imports the bundle, checks it exports a function `handler`, hands it
// each event of the job in turn, and writes {loadMs, loadError, results} to the job's `out`. Plain
// JavaScript, so nothing but Node itself is loaded beside the bundle.
import { readFileSync, writeFileSync } from 'node:fs';
import { Writable } from 'node:stream';
import { pathToFileURL } from 'node:url';

const job = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const outcome = { results: [] };
const finish = () => writeFileSync(job.out, JSON.stringify(outcome));

// The runtime's `awslambda` for response-streaming functions: streamifyResponse marks the handler,
// HttpResponseStream.from writes the status line and headers before the body (here: records them).
if (job.streaming) {
  globalThis.awslambda = {
    streamifyResponse: (body) => Object.assign(body, { streaming: true }),
    HttpResponseStream: { from: (stream, metadata) => Object.assign(stream, { metadata }) },
  };
}

const context = (i) => ({
  functionName: process.env.AWS_LAMBDA_FUNCTION_NAME,
  functionVersion: '$LATEST',
  awsRequestId: `request-${i}`,
  invokedFunctionArn: `arn:aws:lambda:${process.env.AWS_REGION}:000000000000:function:${process.env.AWS_LAMBDA_FUNCTION_NAME}`,
  memoryLimitInMB: process.env.AWS_LAMBDA_FUNCTION_MEMORY_SIZE,
  logGroupName: 'placeholder',
  logStreamName: 'placeholder',
  callbackWaitsForEmptyEventLoop: true,
  getRemainingTimeInMillis: () => 29_000,
  done() {},
  fail() {},
  succeed() {},
});

/** A streaming handler's answer, collected: the metadata HttpResponseStream.from got, and the body. */
async function invokeStreaming(handler, event, ctx) {
  const chunks = [];
  const stream = new Writable({ write: (chunk, _e, done) => (chunks.push(Buffer.from(chunk)), done()) });
  await handler(event, stream, ctx);
  return { ...stream.metadata, body: Buffer.concat(chunks).toString('utf8') };
}

let handler;
try {
  const started = performance.now();
  const mod = await import(pathToFileURL(job.module).href);
  outcome.loadMs = performance.now() - started;
  handler = mod.handler;
  if (typeof handler !== 'function') outcome.loadError = `exports no function handler (exports: ${Object.keys(mod).join(', ') || 'none'})`;
} catch (error) {
  outcome.loadError = String(error?.stack ?? error);
}
if (!outcome.loadError) {
  for (const [i, event] of job.events.entries()) {
    try {
      const value = job.streaming ? await invokeStreaming(handler, event, context(i)) : await handler(event, context(i));
      outcome.results.push({ value: value ?? null });
    } catch (error) {
      outcome.results.push({ error: String(error?.stack ?? error) });
    }
  }
}
finish();
// As Lambda freezes the sandbox after an answer: nothing left running (keep-alive sockets, timers) holds the test.
process.exit(0);
