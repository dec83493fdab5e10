// @support-funnel/client: a typed client of the v1 API, openapi-fetch over the generated types.
//   const api = createSupportFunnelClient({ baseUrl: 'http://localhost:3000/v1', apiKey });
//   const { data, error } = await api.GET('/agents', { params: { query: { limit: 10 } } });
import createClient, { type Client, type ClientOptions } from 'openapi-fetch';
import type { components, paths } from '../generated/api.js';

export type { components, paths };
export type SupportFunnelClient = Client<paths, 'application/json'>;

export interface SupportFunnelClientOptions extends Omit<ClientOptions, 'baseUrl'> {
  /** The API's base URL, ending in /v1. */
  baseUrl: string;
  /** An `sfk_` key; sent as `Authorization: Bearer <apiKey>`. */
  apiKey?: string;
}

export function createSupportFunnelClient({ baseUrl, apiKey, headers, ...rest }: SupportFunnelClientOptions): SupportFunnelClient {
  return createClient<paths, 'application/json'>({
    baseUrl,
    headers: { ...(apiKey && { Authorization: `Bearer ${apiKey}` }), ...(headers as Record<string, string> | undefined) },
    ...rest,
  });
}
