/** autocannon ships no typings; this covers the programmatic use in bench/ (autocannon 9). */
declare module 'autocannon' {
  /** One request as autocannon builds it (defaults merged in); `setupRequest` returns a changed copy. */
  export interface RequestParams {
    method: string;
    path: string;
    headers: Record<string, string>;
    body?: string | Buffer;
    [key: string]: unknown;
  }

  interface Options {
    url: string;
    connections?: number;
    pipelining?: number;
    /** Seconds. */
    duration?: number;
    method?: string;
    headers?: Record<string, string>;
    body?: string | Buffer;
    /** Requests sent in turn on each connection; `setupRequest` builds each one afresh. */
    requests?: { setupRequest?: (request: RequestParams, context: Record<string, unknown>) => RequestParams | undefined }[];
    /** Counts a response whose body differs as a mismatch. */
    expectBody?: string;
    /** Seconds before a request counts as a timeout. */
    timeout?: number;
  }

  interface Histogram {
    average: number;
    mean: number;
    stddev: number;
    min: number;
    max: number;
    total: number;
    p50: number;
    p90: number;
    p99: number;
  }

  interface Result {
    url: string;
    connections: number;
    pipelining: number;
    duration: number;
    start: Date;
    finish: Date;
    requests: Histogram & { sent: number };
    latency: Histogram;
    throughput: Histogram;
    errors: number;
    timeouts: number;
    mismatches: number;
    non2xx: number;
    resets: number;
    '2xx': number;
    statusCodeStats: Record<string, { count: number }>;
  }

  function autocannon(options: Options): Promise<Result> & { stop(): void };
  export default autocannon;
}
