// How tests talk to the server: the typed client (client/) and a raw request for what a typed
// client cannot send. Both check every response against openapi.yaml.
import { createSupportFunnelClient, type SupportFunnelClient } from '../../client/index.js';
import type { components } from '../../generated/api.js';
import type { Plan, Scope } from '../../src/db/schema.js';
import { provision, SCOPES, type Provisioned } from '../../src/provisioning.js';
import { checkResponse } from './contract.js';
import type { TestServer } from './server.js';

type Schemas = components['schemas'];

async function readBody(response: Response): Promise<unknown> {
  const text = await response.text();
  if (text === '') return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** The typed client for a key; every response it receives is checked against the contract. */
export function clientFor(server: TestServer, apiKey?: string, headers?: Record<string, string>): SupportFunnelClient {
  return checkedClient(`${server.baseUrl}/v1`, apiKey, headers);
}

/** The typed client for any base URL ending in /v1 (the mock, say); every response is checked against the contract. */
export function checkedClient(baseUrl: string, apiKey?: string, headers?: Record<string, string>): SupportFunnelClient {
  const client = createSupportFunnelClient({ baseUrl, ...(apiKey && { apiKey }), ...(headers && { headers }) });
  client.use({
    async onResponse({ request, response }) {
      // An event stream never ends by itself: its answer is the status and headers, as request() checks it.
      const stream = response.ok && response.headers.get('content-type')?.startsWith('text/event-stream');
      checkResponse(request.method, request.url, response.status, response.headers, stream ? '' : await readBody(response.clone()));
      return response;
    },
  });
  return client;
}

export interface RawResponse {
  status: number;
  headers: Headers;
  body: any;
}

/** Any request at all (bad headers, broken JSON, unknown paths); the response is checked too. */
export async function request(
  server: Pick<TestServer, 'baseUrl'>,
  method: string,
  path: string,
  options: { apiKey?: string; headers?: Record<string, string>; body?: unknown; rawBody?: string | Buffer } = {},
): Promise<RawResponse> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.apiKey) headers.authorization ??= `Bearer ${options.apiKey}`;
  let body: string | Buffer | undefined = options.rawBody;
  if (options.body !== undefined) {
    body = JSON.stringify(options.body);
    headers['content-type'] ??= 'application/json';
  }
  const url = `${server.baseUrl}${path}`;
  const response = await fetch(url, { method, headers, ...(body !== undefined && { body }) });
  if (response.ok && response.headers.get('content-type')?.startsWith('text/event-stream')) {
    // An event stream never ends by itself: its answer is the status and headers (test/helpers/sse.ts reads streams).
    await response.body?.cancel();
    checkResponse(method, url, response.status, response.headers, '');
    return { status: response.status, headers: response.headers, body: '' };
  }
  const parsed = await readBody(response);
  checkResponse(method, url, response.status, response.headers, parsed);
  return { status: response.status, headers: response.headers, body: parsed };
}

export interface TestWorkspace extends Provisioned {
  api: SupportFunnelClient;
}

/** A new workspace with a key (enterprise and every scope unless told otherwise). */
export async function createWorkspace(server: TestServer, options: { plan?: Plan; scopes?: Scope[]; workspaceId?: string } = {}): Promise<TestWorkspace> {
  const provisioned = await provision(server.db, {
    plan: options.plan ?? 'enterprise',
    scopes: options.scopes ?? [...SCOPES],
    workspaceId: options.workspaceId,
    workspaceName: 'Test workspace',
  });
  return { ...provisioned, api: clientFor(server, provisioned.apiKey) };
}

let sequence = 0;
const unique = (): string => `${Date.now() % 100_000_000}${(sequence++ % 100).toString().padStart(2, '0')}`;

/** A fresh E.164 Brazilian mobile number. */
export const buildPhone = (): string => `+55119${unique().padStart(10, '0').slice(-8)}${Math.floor(Math.random() * 10)}`;

type AiAgentBody = Schemas['AgentCreate'] & { instructions: string; model: string };

export const buildAgent = (overrides: Partial<AiAgentBody> = {}): AiAgentBody => ({
  name: 'Ana Atendimento',
  instructions: 'Responda com cordialidade, em português.',
  model: 'gpt-4o-mini',
  ...overrides,
});

/** A person on the team: online with no capacity limit unless told. */
export const buildHuman = (overrides: Partial<Schemas['AgentCreate']> = {}): Schemas['AgentCreate'] => ({
  type: 'human',
  name: 'Pedro Souza',
  availability: 'online',
  ...overrides,
});

export const buildContact = (overrides: Partial<Schemas['ContactCreate']> = {}): Schemas['ContactCreate'] => ({
  name: 'Mariana Silva',
  phone: buildPhone(),
  email: 'mariana.silva@exemplo.com.br',
  ...overrides,
});

export const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
