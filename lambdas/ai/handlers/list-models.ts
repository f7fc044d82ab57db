// Being written; exports handler.
export const handler = async () => ({ statusCode: 503 });
