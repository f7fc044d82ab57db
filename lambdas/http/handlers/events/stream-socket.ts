/**
 * The Events WebSocket API's function ($connect, $default, $disconnect). Streams are delivered by the
 * Events API work (spec 4.21 "Stream"); until then every connection is refused, so nothing can
 * subscribe through a half-built path.
 */
export const handler = async () => ({ statusCode: 501, body: 'streams are not served yet' });
