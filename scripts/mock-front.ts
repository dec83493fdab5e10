// The mock's front: the service's own request checks, then Prism's example for the operation, made
// to look like a real answer. Prism alone answers every invalid request with one canned 400, any
// Authorization with 200, and every created record with the example's id; in front of it, this
// checks requests exactly as the service does (routing 404/405, the key's form 401, the body
// 415/400/413, the contract 400 naming each wrong field, every error with its requestId), and
// rewrites Prism's answer so it holds nothing the client did not send: a created record (201) gets a
// fresh id and timestamps, echoes the fields it was sent and has the service's value for those left
// out (null, [], {}), a record read or changed by id carries that id and the changes, and a 404 names
// the record asked for. No database, no rate limits, no scopes.
import { createHash, randomUUID } from 'node:crypto';
import express, { type Express, type Request, type RequestHandler, type Response } from 'express';
import { v7 as uuidv7 } from 'uuid';
import { literalPlusQuery, spec } from '../src/contract.js';
import { ApiError } from '../src/errors.js';
import { API_KEY_PATTERN } from '../src/keys.js';
import type { Logger } from '../src/logger.js';
import { bareMimeType, mediaTypeOf } from '../src/media/types.js';
import { jsonBody } from '../src/middleware/body.js';
import { errorHandler } from '../src/middleware/error-handler.js';
import { cors } from '../src/middleware/cors.js';
import { requestContext } from '../src/middleware/request-context.js';
import { matchOperation, pathNotFound } from '../src/middleware/routing.js';
import { contractValidator } from '../src/middleware/validator.js';
import { SCOPES } from '../src/provisioning.js';
import { createQueryParser } from '../src/query.js';
import { STREAM_TOKEN_PATTERN } from '../src/stream/tokens.js';
import { cleanFilename } from '../src/text.js';

const BEARER = /^bearer +(\S+)$/i;
/** What the mock's keys can do: everything, in one workspace. */
const MOCK_KEY = { keyId: randomUUID(), workspaceId: '01935f4b-1111-7222-8333-944455566677', plan: 'enterprise' as const, scopes: [...SCOPES] };
const PASSED_HEADERS = ['ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset', 'retry-after', 'allow'];

/**
 * Any well-formed `Bearer sfk_...` key is the mock's key, and so is any well-formed `?token=sst_...`
 * on the event stream; anything else is a 401, as on the service.
 */
const authenticate: RequestHandler = (req, _res, next) => {
  const key = BEARER.exec(req.get('authorization') ?? '')?.[1];
  const token = req.operation!.operationId === 'streamEvents' && !req.get('authorization') ? req.query.token : undefined;
  const valid = typeof token === 'string' ? STREAM_TOKEN_PATTERN.test(token) : key !== undefined && API_KEY_PATTERN.test(key);
  if (!valid) return next(new ApiError(401, 'unauthorized', 'Missing or invalid API key.'));
  req.auth = { ...MOCK_KEY, scopeSet: new Set(MOCK_KEY.scopes) };
  next();
};

/** The query as the validator read it, percent-encoded again so Prism reads the same values. */
function queryString(req: Request): string {
  const pairs = Object.entries(req.query as Record<string, unknown>).map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`);
  return pairs.length > 0 ? `?${pairs.join('&')}` : '';
}

type Json = Record<string, unknown>;
const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value);

/** The record a path's last parameter names, as the service's 404 calls it (`Contact not found.`). */
const RECORD_NAMES: Record<string, string> = {
  agents: 'Agent',
  contacts: 'Contact',
  channels: 'Channel',
  stages: 'Stage',
  threads: 'Thread',
  media: 'Media',
  events: 'Event',
  'webhook-endpoints': 'Webhook endpoint',
  deliveries: 'Delivery',
  automations: 'Automation',
};

/** `Contact not found.` for /contacts/{id}, `Thread not found.` for /threads/{threadId}/messages. */
function notFoundMessage(path: string): string | undefined {
  const segments = path.split('/');
  const last = segments.findLastIndex((segment) => segment.startsWith('{'));
  const name = last > 0 ? RECORD_NAMES[segments[last - 1]!] : undefined;
  return name && `${name} not found.`;
}

/** Fields the service answers in another shape than they were sent (attachments: `{mediaId}` in, the file's facts out). */
const NOT_ECHOED: Partial<Record<string, readonly string[]>> = { sendMessage: ['attachments'] };
/** Fields whose change merges into the record's value rather than replacing it (a key with null removes it). */
const MERGED: Partial<Record<string, readonly string[]>> = { updateContact: ['attributes'] };

/** What the service stores for a field left out that is neither null, [] nor {} (a person's availability). */
function serviceDefaults(operationId: string, sent: Json): Json {
  if (operationId === 'createAgent') return sent.type === 'human' ? { type: 'human', availability: 'offline' } : { type: 'ai' };
  return {};
}

/** The sent value of `field` over the record's `current` one. */
function changed(operationId: string, field: string, current: unknown, sent: unknown): unknown {
  if (!MERGED[operationId]?.includes(field) || !isObject(current) || !isObject(sent)) return sent;
  const merged: Json = { ...current, ...sent };
  for (const [key, value] of Object.entries(sent)) if (value === null) delete merged[key];
  return merged;
}

/** Prism's example, as the service would answer this request. */
function asAnswer(req: Request, status: number, body: unknown): unknown {
  if (!isObject(body)) return body;
  if (isObject(body.error)) {
    const message = status === 404 ? notFoundMessage(req.operation!.path) : undefined;
    return { ...body, error: { ...body.error, ...(message && { message }), requestId: req.id } };
  }
  if (status !== 200 && status !== 201) return body;
  const answer: Json = { ...body };
  const operationId = req.operation!.operationId;
  const id = req.openapi?.pathParams?.id;
  if (id !== undefined && 'id' in answer) {
    answer.id = id.toLowerCase();
  } else if (status === 201 && 'id' in answer) {
    answer.id = uuidv7();
    const now = new Date().toISOString();
    for (const field of ['createdAt', 'updatedAt']) if (field in answer) answer[field] = now;
  }
  if (isObject(req.body)) {
    const sent = req.body;
    for (const [field, value] of Object.entries(sent)) {
      if (field in answer && !NOT_ECHOED[operationId]?.includes(field)) answer[field] = changed(operationId, field, answer[field], value);
    }
    // A field the client left out is not the example's: what the service stores for it.
    if (status === 201) {
      for (const [field, value] of Object.entries({ ...leftOutValues(req, sent), ...serviceDefaults(operationId, sent) })) {
        if (field in answer) answer[field] = value;
      }
    }
  }
  return answer;
}

const schemaAt = (ref: string): Json =>
  ref
    .split('/')
    .slice(1)
    .reduce<Json>((node, key) => node[key] as Json, spec);

/** What nullableLeftOut reads of an operation: its JSON request and 201 schemas. */
interface JsonContent {
  content?: { 'application/json'?: { schema?: { $ref?: string } } };
}
interface OperationNode {
  requestBody?: JsonContent;
  responses?: Record<string, JsonContent>;
}

/** The property names a request schema allows, through `oneOf`/`anyOf`/`allOf` branches (ChannelCreate's). */
function inputFields(schema: Json): string[] {
  const resolved = typeof schema.$ref === 'string' ? schemaAt(schema.$ref) : schema;
  const branches = [...((resolved.oneOf ?? []) as Json[]), ...((resolved.anyOf ?? []) as Json[]), ...((resolved.allOf ?? []) as Json[])];
  return [...new Set([...Object.keys(resolved.properties ?? {}), ...branches.flatMap(inputFields)])];
}

/** The empty value a record's field holds when nothing was sent for it: null where allowed, else [] or {}; undefined for the others. */
function emptyValue(property: Json | undefined): unknown {
  if (!property) return undefined;
  const resolved = typeof property.$ref === 'string' ? schemaAt(property.$ref) : property;
  const types = [resolved.type ?? [], ...((resolved.oneOf ?? resolved.anyOf ?? []) as Json[]).map((branch) => branch.type ?? [])].flat();
  if (types.includes('null')) return null;
  if (types.includes('array')) return [];
  if (types.includes('object')) return {};
  return undefined;
}

/** Fields of the operation's request body that the client did not send, with the empty value its 201 record holds for each. */
function leftOutValues(req: Request, sent: Json): Json {
  const paths = spec.paths as Record<string, Record<string, OperationNode | undefined> | undefined>;
  const operation = paths[req.operation!.path]?.[req.operation!.method];
  const input = operation?.requestBody?.content?.['application/json']?.schema;
  const output = operation?.responses?.['201']?.content?.['application/json']?.schema;
  if (!input?.$ref || !output?.$ref) return {};
  const record = schemaAt(output.$ref).properties as Record<string, Json>;
  const values: Json = {};
  for (const field of inputFields(schemaAt(input.$ref))) {
    const value = field in sent ? undefined : emptyValue(record[field]);
    if (value !== undefined) values[field] = value;
  }
  return values;
}

/** Whether the operation's success answers JSON (not a file). */
function hasJsonAnswer(req: Request): boolean {
  const paths = spec.paths as Record<string, Record<string, OperationNode | undefined> | undefined>;
  const responses = paths[req.operation!.path]?.[req.operation!.method]?.responses ?? {};
  return Object.entries(responses).every(([status, entry]) => !status.startsWith('2') || !entry?.content || 'application/json' in entry.content);
}

/** Asks Prism (serving the contract with /v1 paths) for the operation's example and answers with it. */
function fromPrism(prismUrl: string): RequestHandler {
  return async (req, res) => {
    // The event stream answers its example events (Prism's example of text/event-stream), then ends.
    const stream = req.operation!.operationId === 'streamEvents';
    const headers: Record<string, string> = {
      accept: stream ? 'text/event-stream' : 'application/json',
      authorization: req.get('authorization') ?? `Bearer sfk_${'0'.repeat(43)}`,
    };
    const prefer = req.get('prefer');
    if (prefer) headers.prefer = prefer;
    let body: string | Buffer | undefined;
    if (req.operation!.rawBody) {
      // A file (POST /media): handed on as it came.
      headers['content-type'] = req.get('content-type')!;
      body = req.body as Buffer;
    } else if (req.operation!.hasBody) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(req.body);
    }
    // A file's bytes (GET /media/{id}): whatever type the contract's example has.
    if (!stream && !hasJsonAnswer(req)) headers.accept = '*/*';
    const path = req.originalUrl.split('?', 1)[0]!;
    const response = await fetch(`${prismUrl}${path}${queryString(req)}`, { method: req.method, headers, ...(body !== undefined && { body }) });
    for (const name of PASSED_HEADERS) {
      const value = response.headers.get(name);
      if (value !== null) res.set(name, value);
    }
    res.status(response.status);
    const type = response.headers.get('content-type') ?? '';
    if (response.ok && !stream && !type.startsWith('application/json')) return res.type(type).send(Buffer.from(await response.arrayBuffer()));
    const text = await response.text();
    if (text === '') return res.end();
    if (stream && response.ok) return serveExampleStream(req, res, text);
    if (req.operation!.operationId === 'uploadMedia' && response.status === 201) return res.json(uploadAnswer(req, JSON.parse(text) as Json));
    res.json(asAnswer(req, response.status, JSON.parse(text)));
  };
}

/** The upload as the service would answer it: the example's shape, the file's own facts (type, size, digest, cleaned name). */
function uploadAnswer(req: Request, example: Json): Json {
  const bytes = req.body as Buffer;
  const mimeType = bareMimeType(req.get('content-type'))!;
  const filename = (req.query as { filename?: string }).filename;
  return {
    ...example,
    id: uuidv7(),
    type: mediaTypeOf(mimeType) ?? example.type,
    mimeType,
    size: bytes.length,
    sha256: createHash('sha256').update(bytes).digest('hex'),
    filename: filename === undefined ? null : cleanFilename(filename),
    caption: null,
    status: 'stored',
  };
}

/** How often an open example stream says it is alive, as the service's does. */
const STREAM_KEEPALIVE_MS = 15_000;

/**
 * The contract's example events as the service would stream them: only the `types` asked for, those
 * after `Last-Event-ID` (header or `lastEventId`; an id not among them is `event: reset`), then the
 * stream stays open with a keep-alive comment every 15 s until the client leaves (an EventSource
 * would otherwise reconnect and get the same events again).
 */
function serveExampleStream(req: Request, res: Response, example: string): void {
  const frames = example
    .split(/\n\n+/)
    .map((frame) => frame.trim())
    .filter((frame) => frame !== '' && !frame.startsWith(':'))
    .map((frame) => ({ text: `${frame}\n\n`, id: /^id: (.*)$/m.exec(frame)?.[1], event: /^event: (.*)$/m.exec(frame)?.[1] }));
  const types = [(req.query as { types?: string | string[] }).types ?? []].flat().flatMap((t) => t.split(','));
  const wanted = frames.filter((frame) => types.length === 0 || (frame.event !== undefined && types.includes(frame.event)));
  const last = req.get('last-event-id') ?? (req.query as { lastEventId?: string }).lastEventId;
  const at = last === undefined ? -1 : frames.findIndex((frame) => frame.id === last);
  const sent = last === undefined ? wanted : at === -1 ? [] : wanted.filter((frame) => frames.indexOf(frame) > at);
  res.status(200).type('text/event-stream; charset=utf-8').setHeader('X-Accel-Buffering', 'no');
  res.write(`${last !== undefined && at === -1 ? 'event: reset\ndata: {}\n\n' : ''}${sent.map((frame) => frame.text).join('')}`);
  const keepalive = setInterval(() => res.write(': keepalive\n\n'), STREAM_KEEPALIVE_MS);
  res.once('close', () => clearInterval(keepalive));
}

/**
 * Meta's webhooks (outside /v1, no key, a raw body): handed to Prism as they come, so the mock
 * answers Meta's verification and deliveries with the contract's examples, as the service would.
 */
function metaWebhooksToPrism(prismUrl: string): RequestHandler[] {
  return [
    express.raw({ type: () => true, limit: '1mb' }),
    async (req, res) => {
      const headers: Record<string, string> = {};
      for (const name of ['content-type', 'x-hub-signature-256']) {
        const value = req.get(name);
        if (value !== undefined) headers[name] = value;
      }
      const hasBody = Buffer.isBuffer(req.body) && req.body.length > 0;
      const response = await fetch(`${prismUrl}${req.originalUrl}`, { method: req.method, headers, ...(hasBody && { body: req.body as Buffer }) });
      res.status(response.status);
      const type = response.headers.get('content-type');
      if (type) res.type(type);
      res.send(Buffer.from(await response.arrayBuffer()));
    },
  ];
}

/** A file's body (POST /media), read whole to hand to Prism: the mock serves examples, not files. */
const readRaw = express.raw({ type: () => true, limit: '100mb' });
const rawBody: RequestHandler = (req, res, next) => (req.operation!.rawBody ? readRaw(req, res, next) : next());

export function createMockFront({ prismUrl, logger }: { prismUrl: string; logger: Logger }): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', createQueryParser(literalPlusQuery));
  app.use(requestContext(app, logger));
  app.use(cors);
  app.use('/v1', matchOperation(), authenticate, jsonBody, ...contractValidator({ validateResponses: false }), rawBody, fromPrism(prismUrl));
  app.use('/webhooks/meta', ...metaWebhooksToPrism(prismUrl));
  app.use((_req, _res, next) => next(pathNotFound()));
  app.use(errorHandler);
  return app;
}
