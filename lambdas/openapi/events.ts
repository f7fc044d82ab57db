/** The Events API's routes (spec 4.21). */
import type { OperationDocs } from './operation.js';

export const EVENTS_OPERATIONS: OperationDocs = {};
