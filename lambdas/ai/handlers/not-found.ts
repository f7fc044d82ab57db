import { notFoundHandler } from '../../http/not-found.js';

export const handler = notFoundHandler('ai.fallback');
