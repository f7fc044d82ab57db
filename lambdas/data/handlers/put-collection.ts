import { httpHandler } from '../../http/handler.js';
import { ApiError } from '../../http/errors.js';

// PLACEHOLDER: being built (issue 4).
export const handler = httpHandler('data.collections.put', async () => {
  throw new ApiError(501, 'not_implemented', 'Not built yet.');
});
