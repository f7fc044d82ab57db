/**
 * The arithmetic of the cost model: what a million calls of a route cost, from what one call used
 * (scripts/costs/meter.ts), how long its function ran, and which front doors it went through.
 */
import type { Usage } from './meter.js';
import { PRICES } from './prices.js';

/** The stack's function memory (lib/function-defaults.ts), in GB as Lambda bills it. */
export const FUNCTION_GB = 512 / 1024;

/** How a call reaches its function. */
export interface Path {
  /** Through API Gateway's HTTP API (a route), or not (a queue consumer). */
  httpApi: boolean;
  /** Through a CloudFront distribution first (the Events and AI edges). */
  cloudFront: boolean;
  /** Lambda invocations per call (a queue consumer's batch shares one). */
  invocations: number;
  /** The memory of a Lambda@Edge function the distribution runs on the call's path, MB (none: no edge function). */
  edgeFunctionMb?: number;
}

/** One call of a route: what it used and how long its function ran. */
export interface CallProfile {
  usage: Usage;
  /** Median handler duration, ms (Lambda bills whole ms). */
  durationMs: number;
  path: Path;
  /** Request body bytes (API Gateway meters HTTP API requests in 512 KB steps). */
  requestBytes?: number;
}

/** USD per million calls, by what is billed. */
export interface MillionCost {
  lambda: number;
  apiGateway: number;
  cloudFront: number;
  /** Lambda@Edge, on the paths that run one. */
  edgeFunction: number;
  dynamo: number;
  s3: number;
  sqs: number;
  total: number;
}

const MILLION = 1e6;
const HTTP_API_STEP_BYTES = 512 * 1024;

/** Lambda's bill for one invocation of `ms` at FUNCTION_GB: the request plus whole milliseconds. */
export const lambdaUsd = (ms: number): number => PRICES.lambdaRequest.usd + (Math.ceil(ms) / 1000) * FUNCTION_GB * PRICES.lambdaArmGbSecond.usd;

export function millionCalls(call: CallProfile): MillionCost {
  const { usage: u, path } = call;
  const lambda = MILLION * path.invocations * lambdaUsd(call.durationMs);
  const apiGateway = path.httpApi ? MILLION * Math.max(1, Math.ceil((call.requestBytes ?? 0) / HTTP_API_STEP_BYTES)) * PRICES.httpApiRequest.usd : 0;
  const cloudFront = path.cloudFront ? MILLION * PRICES.cloudFrontHttpsRequest.usd : 0;
  const edgeFunction = path.edgeFunctionMb ? MILLION * edgeFunctionUsd(path.edgeFunctionMb) : 0;
  const dynamo = MILLION * (u.readUnits * PRICES.dynamoReadUnit.usd + u.writeUnits * PRICES.dynamoWriteUnit.usd);
  const s3 = MILLION * (u.s3Puts * PRICES.s3PutRequest.usd + u.s3Gets * PRICES.s3GetRequest.usd);
  const sqs = MILLION * u.sqsRequests * PRICES.sqsRequest.usd;
  return { lambda, apiGateway, cloudFront, edgeFunction, dynamo, s3, sqs, total: lambda + apiGateway + cloudFront + edgeFunction + dynamo + s3 + sqs };
}

/**
 * One run of an edge function that passes the request on untouched (the Data distribution's upload
 * relay for anything but a PUT over the Lambda payload: no I/O), billed as its minimum, 1 ms.
 */
export const EDGE_FUNCTION_MS = 1;
export const edgeFunctionUsd = (memoryMb: number): number => PRICES.lambdaEdgeRequest.usd + (EDGE_FUNCTION_MS / 1000) * (memoryMb / 1024) * PRICES.lambdaEdgeGbSecond.usd;

/** What each second a function waits (on a model, a webhook receiver) adds to a million calls. */
export const waitUsdPerMillionPerSecond = (): number => MILLION * FUNCTION_GB * PRICES.lambdaArmGbSecond.usd;

/**
 * Assumed in-region latency of one AWS call, ms: the embedded engine answers in microseconds, AWS in
 * milliseconds, and a function waiting on it is billed for the wait. An assumption, not a measurement
 * (docs/costs.md); calls are taken as sequential, an upper bound.
 */
export const AWS_CALL_MS = { dynamo: 5, s3: 20, sqs: 10 } as const;

/** The wait a call's AWS requests add to its duration on AWS, by AWS_CALL_MS. */
export const awsWaitMs = (u: Usage): number => u.dynamoCalls * AWS_CALL_MS.dynamo + (u.s3Puts + u.s3Gets) * AWS_CALL_MS.s3 + u.sqsRequests * AWS_CALL_MS.sqs;
