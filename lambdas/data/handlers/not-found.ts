import { notFoundHandler } from '../../http/not-found.js';

export const handler = notFoundHandler('data.fallback');
