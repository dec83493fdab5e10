// Checks a response against openapi.yaml: the status is documented for the operation (or is one of
// the pipeline's own answers), the body matches its schema, X-Request-Id is present and an error
// body's requestId repeats it. Every response in the suite goes through here, through the client
// middleware or `request`.
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { contractOperations, loadSpec, type Operation } from '../../src/contract.js';

const spec = loadSpec();
const ajv = new Ajv2020({ strict: false, allErrors: true });
(addFormats as unknown as (ajv: Ajv2020, options: { mode: string }) => void)(ajv, { mode: 'full' });
ajv.addSchema(spec, 'openapi');

const paramCount = (path: string): number => (path.match(/\{/g) ?? []).length;
const routes = [...contractOperations]
  .sort((a, b) => paramCount(a.path) - paramCount(b.path))
  .map((op) => ({ op, regex: new RegExp(`^/v1${op.path.replace(/\{\w+\}/g, '[^/]+')}/?$`) }));

export function findOperation(method: string, pathname: string): Operation | undefined {
  return routes.find((r) => r.op.method === method.toLowerCase() && r.regex.test(pathname))?.op;
}

const pathKnown = (pathname: string): boolean => routes.some((r) => r.regex.test(pathname));

export class ContractViolation extends Error {}

function responseRef(op: Operation, status: number): string | undefined {
  const responses = spec.paths[op.path][op.method].responses as Record<string, { $ref?: string; content?: unknown }>;
  const entry = responses[String(status)];
  if (!entry) return undefined;
  const base = entry.$ref ? entry.$ref.replace('#/', '') : `paths/${op.path.replace(/~/g, '~0').replace(/\//g, '~1')}/${op.method}/responses/${status}`;
  return `openapi#/${base}/content/application~1json/schema`;
}

function hasBody(op: Operation, status: number): boolean {
  const entry = spec.paths[op.path][op.method].responses[String(status)];
  const resolved = entry?.$ref ? spec.components.responses[entry.$ref.split('/').pop()] : entry;
  return Boolean(resolved?.content);
}

function validate(ref: string, body: unknown, where: string): void {
  const check = ajv.getSchema(ref);
  if (!check) throw new ContractViolation(`${where}: no schema at ${ref}`);
  if (!check(body)) {
    throw new ContractViolation(`${where}: body does not match ${ref}: ${ajv.errorsText(check.errors)}\n${JSON.stringify(body)}`);
  }
}

/**
 * Throws ContractViolation when the response breaks the contract. `body` is the parsed JSON body,
 * or undefined when the response has none.
 */
export function checkResponse(method: string, url: string, status: number, headers: Headers, body: unknown): void {
  const pathname = new URL(url).pathname;
  const where = `${method} ${pathname} -> ${status}`;
  const requestId = headers.get('x-request-id');
  if (!requestId) throw new ContractViolation(`${where}: no X-Request-Id`);
  const errorRequestId = (body as { error?: { requestId?: unknown } } | undefined)?.error?.requestId;
  if (status >= 400 && typeof body === 'object' && body !== null && 'error' in body && errorRequestId !== requestId) {
    throw new ContractViolation(`${where}: error.requestId ${JSON.stringify(errorRequestId)} is not the X-Request-Id ${requestId}`);
  }
  if (/^\/webhooks\/meta\/[^/]+$/.test(pathname)) return checkWebhookResponse(method, status, headers, body, where);
  if (!pathname.startsWith('/v1/') && pathname !== '/v1') return;
  const op = findOperation(method, pathname);
  if (!op) {
    // Outside the operations: 404 for an unknown path, 405 for a known path and another method.
    const expected = pathKnown(pathname) ? 405 : 404;
    if (status !== expected) throw new ContractViolation(`${where}: expected ${expected} for a request no operation matches`);
    validate('openapi#/components/schemas/ErrorResponse', body, where);
    return;
  }
  if (status === 404 && body && (body as { error?: { message?: string } }).error?.message === 'No such endpoint.') {
    validate('openapi#/components/schemas/ErrorResponse', body, where);
    return;
  }
  const ref = responseRef(op, status);
  if (!ref) throw new ContractViolation(`${where}: status ${status} is not documented for ${op.operationId}`);
  if (!hasBody(op, status)) {
    if (body !== undefined) throw new ContractViolation(`${where}: documented without a body but has one`);
    return;
  }
  const type = headers.get('content-type') ?? '';
  if (type.startsWith('text/event-stream') && status === 200 && op.operationId === 'streamEvents') return checkEventStream(body, where);
  if (!type.startsWith('application/json')) {
    // A file (GET /media/{id}): its Content-Type must be one the operation documents; bytes have no schema.
    const entry = spec.paths[op.path][op.method].responses[String(status)];
    const documented = Object.keys((entry?.$ref ? undefined : entry?.content) ?? {});
    if (documented.includes(type.split(';', 1)[0]!.trim()) && !documented.includes('application/json')) return;
  }
  if (!type.startsWith('application/json')) throw new ContractViolation(`${where}: content-type ${type}`);
  validate(ref, body, where);
}

/** Every frame of an event stream: `event: reset` with `data: {}`, or an Event of the type `event:` names, its id as `id:`. */
function checkEventStream(body: unknown, where: string): void {
  if (typeof body !== 'string') throw new ContractViolation(`${where}: the stream is not text`);
  for (const block of body.split('\n\n').filter((b) => b.trim() !== '')) {
    const lines = block.split('\n').filter((line) => !line.startsWith(':'));
    if (lines.length === 0) continue;
    const field = (name: string) => lines.find((line) => line.startsWith(`${name}: `))?.slice(name.length + 2);
    const data = JSON.parse(field('data') ?? 'null') as { id?: string; type?: string } | null;
    if (field('event') === 'reset') {
      if (JSON.stringify(data) !== '{}') throw new ContractViolation(`${where}: a reset frame's data is not {}`);
      continue;
    }
    validate('openapi#/components/schemas/Event', data, where);
    if (field('id') !== data!.id || field('event') !== data!.type) throw new ContractViolation(`${where}: a frame's id/event lines differ from its data`);
  }
}

/** Meta's webhook paths sit outside /v1 (a path item with servers of its own); checked the same way. */
function checkWebhookResponse(method: string, status: number, headers: Headers, body: unknown, where: string): void {
  const path = '/webhooks/meta/{channelId}';
  const operation = spec.paths[path][method.toLowerCase()];
  if (!operation) {
    if (status !== 404) throw new ContractViolation(`${where}: expected 404 for a method the webhook does not take`);
    return;
  }
  const entry = operation.responses[String(status)];
  if (!entry) throw new ContractViolation(`${where}: status ${status} is not documented for ${operation.operationId}`);
  const resolved = entry.$ref ? spec.components.responses[entry.$ref.split('/').pop()] : entry;
  const type = headers.get('content-type') ?? '';
  const [mediaType] = Object.keys(resolved.content ?? {});
  if (!type.startsWith(mediaType ?? '')) throw new ContractViolation(`${where}: content-type ${type}, documented ${mediaType}`);
  if (mediaType !== 'application/json') return;
  const base = entry.$ref ? entry.$ref.replace('#/', '') : `paths/${path.replace(/~/g, '~0').replace(/\//g, '~1')}/${method.toLowerCase()}/responses/${status}`;
  validate(`openapi#/${base}/content/application~1json/schema`, body, where);
}
