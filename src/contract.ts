// The contract, read once: the parsed openapi.yaml and the operations it declares.
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { operations } from '../generated/api.js';

/** Operations outside /v1 (a path item with `servers` of its own): Meta's webhooks, no API key. */
export type ServiceOperationId = 'verifyMetaWebhook' | 'receiveMetaWebhook';
/** The top-level `webhooks`: what this service sends to integrators, not operations it serves. */
export type WebhookEventOperationId =
  | 'onContactCreatedEvent'
  | 'onContactUpdatedEvent'
  | 'onContactMergedEvent'
  | 'onThreadCreatedEvent'
  | 'onThreadUpdatedEvent'
  | 'onMessageCreatedEvent'
  | 'onMessageUpdatedEvent'
  | 'onNpsAnsweredEvent'
  | 'onAutomationRunEvent'
  | 'onSlaWarningEvent'
  | 'onSlaBreachedEvent';
/** The /v1 operations: authenticated, validated and dispatched by operationId. */
export type OperationId = Exclude<keyof operations, ServiceOperationId | WebhookEventOperationId>;

export interface Operation {
  readonly operationId: OperationId;
  readonly method: 'get' | 'post' | 'patch' | 'put' | 'delete';
  /** The path as the contract writes it, e.g. /agents/{id}. */
  readonly path: string;
  /** The same path in Express syntax, e.g. /agents/:id. */
  readonly expressPath: string;
  /** Scopes the key must hold (all of them): the operation's `x-scopes`. */
  readonly scopes: readonly string[];
  readonly hasBody: boolean;
  /** The body must be sent (`requestBody.required`); an optional one left out reads as `{}`. */
  readonly bodyRequired: boolean;
  /** The body is a file with its own Content-Type (POST /media), not JSON: read as a stream. */
  readonly rawBody: boolean;
}

export const specPath = fileURLToPath(new URL('../openapi.yaml', import.meta.url));
export const specYaml = fs.readFileSync(specPath, 'utf8');

/**
 * The contract parsed once. A build (scripts/build.mjs) holds it as JSON too, next to its copy of
 * openapi.yaml, which reads in a fraction of the time the YAML takes to parse (a large part of a start);
 * the YAML parser is then not even loaded (73 modules).
 */
const builtSpec = fileURLToPath(new URL('../openapi.build.json', import.meta.url));
const parsedSpec: unknown = fs.existsSync(builtSpec) ? JSON.parse(fs.readFileSync(builtSpec, 'utf8')) : (await import('yaml')).parse(specYaml);

/** A fresh copy of the parsed contract (consumers such as the validator may mutate theirs). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- an OpenAPI document: its consumers (validator, docs, mock, tests) each read their own parts
export function loadSpec(): Record<string, any> {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- as above
  return structuredClone(parsedSpec) as Record<string, any>;
}

const METHODS = ['get', 'post', 'patch', 'put', 'delete'] as const;

/** The parts of the OpenAPI document this module reads (the rest stays untyped). */
interface SchemaNode {
  $ref?: string;
  format?: string;
  pattern?: unknown;
  default?: number;
  minimum?: number;
  maximum?: number;
  examples?: unknown[];
}
interface ParameterNode {
  $ref?: string;
  in?: string;
  name?: string;
  schema?: SchemaNode;
}
interface OperationNode {
  operationId: OperationId;
  'x-scopes'?: unknown;
  requestBody?: { required?: boolean; content?: Record<string, unknown> };
  parameters?: ParameterNode[];
}
type PathItemNode = Partial<Record<(typeof METHODS)[number], OperationNode>> & { servers?: unknown; parameters?: ParameterNode[] };
interface SpecDocument {
  paths: Record<string, PathItemNode>;
  components: { parameters: Record<string, ParameterNode>; schemas: Record<string, SchemaNode> };
}

function listOperations(spec: SpecDocument): Operation[] {
  const found: Operation[] = [];
  for (const [path, item] of Object.entries(spec.paths)) {
    if (item.servers) continue;
    for (const method of METHODS) {
      const op = item[method];
      if (!op) continue;
      const scopes = op['x-scopes'];
      if (!Array.isArray(scopes)) throw new Error(`openapi.yaml: ${op.operationId} has no x-scopes (write [] for none)`);
      found.push({
        operationId: op.operationId,
        method,
        path,
        expressPath: path.replace(/\{(\w+)\}/g, ':$1'),
        scopes: scopes.map(String),
        hasBody: Boolean(op.requestBody),
        bodyRequired: op.requestBody?.required === true,
        rawBody: Boolean(op.requestBody?.content) && !('application/json' in op.requestBody!.content!),
      });
    }
  }
  return found;
}

/** A node of the document, its `$ref` followed (to the end of a chain). */
function resolveRef<T extends { $ref?: string }>(spec: SpecDocument, node: T | undefined): T | undefined {
  return node?.$ref
    ? resolveRef(
        spec,
        node.$ref
          .split('/')
          .slice(1)
          .reduce<unknown>((o, k) => (o as Record<string, unknown>)[k], spec) as T,
      )
    : node;
}

/** Query parameters whose values may hold a `+` and never a space: date-times, e-mails, phones. */
function literalPlusQueryParameters(spec: SpecDocument): Set<string> {
  const resolve = <T extends { $ref?: string }>(node: T | undefined): T | undefined => resolveRef(spec, node);
  const names = new Set<string>();
  for (const item of Object.values(spec.paths)) {
    for (const op of [item, ...METHODS.map((m) => item[m])]) {
      for (const parameter of (op?.parameters ?? []).map(resolve)) {
        const schema = resolve(parameter?.schema);
        const plusy = ['date-time', 'email'].includes(schema?.format ?? '') || (typeof schema?.pattern === 'string' && schema.pattern.startsWith('^\\+'));
        if (parameter?.in === 'query' && parameter.name && plusy) names.add(parameter.name);
      }
    }
  }
  return names;
}

export interface Bounds {
  readonly default: number;
  readonly minimum: number;
  readonly maximum: number;
}

/** The default and range of a shared integer query parameter (components.parameters.<name>). */
function integerBounds(spec: SpecDocument, name: string): Bounds {
  const schema = spec.components.parameters[name]?.schema ?? {};
  const bound = (key: 'default' | 'minimum' | 'maximum'): number => {
    const value = schema[key];
    if (!Number.isInteger(value)) throw new Error(`openapi.yaml: parameter ${name} has no integer ${key}`);
    return value!;
  };
  return Object.freeze({ default: bound('default'), minimum: bound('minimum'), maximum: bound('maximum') });
}

/**
 * The first example of each named schema that has a pattern (e.g. Phone), by pattern: a value that
 * fails the pattern is told what a good one looks like.
 */
function patternExamples(spec: SpecDocument): Map<string, string> {
  const found = new Map<string, string>();
  for (const schema of Object.values(spec.components.schemas)) {
    const example = schema.examples?.[0];
    // A pattern the empty text passes (the "no U+0000" of free text) is a guard, not a format, and
    // other fields share it: an example would name the wrong field's.
    if (typeof schema.pattern === 'string' && typeof example === 'string' && !new RegExp(schema.pattern, 'u').test('')) found.set(schema.pattern, example);
  }
  return found;
}

/** Keywords whose values are data, not schemas: the walk below does not read them as schemas. */
const DATA_KEYWORDS = new Set(['example', 'examples', 'default', 'const', 'enum']);

/**
 * The most members (an array's items, an object's properties) any object or array of a JSON request
 * body may hold under the contract: the largest `maxItems`, `maxProperties` or number of declared
 * properties of a schema reachable from a /v1 operation's JSON body. Every such array and open
 * object is bounded (test/wide-json.test.ts), so a body holding a larger one is wrong wherever it is,
 * and is refused before the contract's check walks it member by member (body.ts).
 */
function maxBodyMembersOf(spec: SpecDocument): number {
  let most = 0;
  const seen = new Set<unknown>();
  const walk = (node: unknown): void => {
    if (typeof node !== 'object' || node === null || seen.has(node)) return;
    seen.add(node);
    const schema = node as Record<string, unknown>;
    if (typeof schema.$ref === 'string') return walk(spec.components.schemas[schema.$ref.split('/').pop()!]);
    for (const bound of [schema.maxItems, schema.maxProperties]) if (typeof bound === 'number') most = Math.max(most, bound);
    if (typeof schema.properties === 'object' && schema.properties !== null) most = Math.max(most, Object.keys(schema.properties).length);
    for (const [key, value] of Object.entries(schema)) if (!DATA_KEYWORDS.has(key)) walk(value);
  };
  for (const item of Object.values(spec.paths)) {
    if (item.servers) continue;
    for (const method of METHODS) walk(item[method]?.requestBody?.content?.['application/json']);
  }
  return most;
}

export const spec = loadSpec();
export const specJson = JSON.stringify(spec);
const document = spec as SpecDocument;
export const contractOperations: readonly Operation[] = listOperations(document);
export const literalPlusQuery: ReadonlySet<string> = literalPlusQueryParameters(document);
export const maxBodyMembers = maxBodyMembersOf(document);
const examplesByPattern = patternExamples(document);

/**
 * The values of each tag of the contract's tagged unions (a discriminator's `mapping`), by the tag's
 * name; a name two unions share is left out, since the message could not tell which one it is.
 */
function discriminatorValues(spec: SpecDocument): Map<string, string[]> {
  const found = new Map<string, string[] | null>();
  for (const schema of Object.values(spec.components.schemas) as Array<{ discriminator?: { propertyName?: string; mapping?: object } }>) {
    const name = schema.discriminator?.propertyName;
    if (name === undefined || !schema.discriminator?.mapping) continue;
    found.set(name, found.has(name) ? null : Object.keys(schema.discriminator.mapping));
  }
  return new Map([...found].filter((entry): entry is [string, string[]] => entry[1] !== null));
}
const tagValues = discriminatorValues(document);

/** A validator's message, with an example appended when it is a pattern the contract gives one for. */
export function withExample(message: string): string {
  const pattern = /^must match pattern "(.*)"$/.exec(message)?.[1];
  const example = pattern === undefined ? undefined : examplesByPattern.get(pattern);
  return example === undefined ? message : `${message}, e.g. ${example}`;
}

/**
 * A validator's problem as a detail: its message with an example (withExample); a tagged union's
 * tag that is missing or unknown is named at the tag itself (`/body/trigger/event`), with the
 * values it takes.
 */
export function describeProblem(path: string, message: string): { path: string; message: string } {
  const tag = /^(?:tag "(\w+)" must be string|value of tag "(\w+)" must be in oneOf)$/.exec(message);
  const name = tag?.[1] ?? tag?.[2];
  if (name === undefined) return { path, message: withExample(message) };
  const values = tagValues.get(name);
  return { path: `${path}/${name}`, message: values ? `must be one of ${values.join(', ')}` : 'must be one of the values the contract lists' };
}

/** `page` and `limit` of every list, as the contract's Page and Limit parameters define them. */
export const pageBounds: Bounds = integerBounds(document, 'Page');
export const limitBounds: Bounds = integerBounds(document, 'Limit');
