/**
 * Errors are data: one type carries the HTTP status and the spec's code. Every API answers with one
 * JSON shape, compatible with OpenAI clients: {"error": {"code", "message", "type", "param"}}.
 */

const TYPES: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  403: 'permission_error',
  404: 'not_found_error',
  405: 'invalid_request_error',
  409: 'conflict_error',
  410: 'not_found_error',
  411: 'invalid_request_error',
  413: 'invalid_request_error',
  426: 'invalid_request_error',
  429: 'rate_limit_error',
  502: 'api_error',
  503: 'api_error',
  504: 'timeout_error',
};

export class ApiError extends Error {
  override name = 'ApiError';
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly param: string | null = null,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }

  get type(): string {
    return TYPES[this.status] ?? (this.status >= 500 ? 'api_error' : 'invalid_request_error');
  }

  toBody() {
    return { error: { code: this.code, message: this.message, type: this.type, param: this.param } };
  }
}

export const badRequest = (code: string, message: string, param: string | null = null) => new ApiError(400, code, message, param);
export const forbidden = (code: string, message: string) => new ApiError(403, code, message);
export const notFound = (code: string, message: string) => new ApiError(404, code, message);
