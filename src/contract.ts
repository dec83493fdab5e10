// The contract, read once: the parsed openapi.yaml and the operations it declares.
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import type { operations } from '../generated/api.js';

/** Operations outside /v1 (a path item with `servers` of its own): Meta's webhooks, no API key. */
export type ServiceOperationId = 'verifyMetaWebhook' | 'receiveMetaWebhook';
/** The top-level `webhooks`: what this service sends to integrators, not operations it serves. */
export type WebhookEventOperationId =
  | 'onContactCreatedEvent'
  | 'onThreadCreatedEvent'
  | 'onThreadUpdatedEvent'
  | 'onMessageCreatedEvent'
  | 'onMessageUpdatedEvent'
  | 'onNpsAnsweredEvent';
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
}

export const specPath = fileURLToPath(new URL('../openapi.yaml', import.meta.url));
export const specYaml = fs.readFileSync(specPath, 'utf8');

/** A fresh copy of the parsed contract (consumers such as the validator may mutate theirs). */
export function loadSpec(): Record<string, any> {
  return parse(specYaml) as Record<string, any>;
}

const METHODS = ['get', 'post', 'patch', 'put', 'delete'] as const;

function listOperations(spec: Record<string, any>): Operation[] {
  const found: Operation[] = [];
  for (const [path, item] of Object.entries<Record<string, any>>(spec.paths)) {
    if (item.servers) continue;
    for (const method of METHODS) {
      const op = item[method];
      if (!op) continue;
      if (!Array.isArray(op['x-scopes'])) throw new Error(`openapi.yaml: ${op.operationId} has no x-scopes (write [] for none)`);
      found.push({
        operationId: op.operationId,
        method,
        path,
        expressPath: path.replace(/\{(\w+)\}/g, ':$1'),
        scopes: op['x-scopes'],
        hasBody: Boolean(op.requestBody),
      });
    }
  }
  return found;
}

/** Query parameters whose values may hold a `+` and never a space: date-times, e-mails, phones. */
function literalPlusQueryParameters(spec: Record<string, any>): Set<string> {
  const resolve = (node: any): any => (node?.$ref ? resolve(node.$ref.split('/').slice(1).reduce((o: any, k: string) => o[k], spec)) : node);
  const names = new Set<string>();
  for (const item of Object.values<Record<string, any>>(spec.paths)) {
    for (const op of [item, ...METHODS.map((m) => item[m])].filter(Boolean)) {
      for (const parameter of (op.parameters ?? []).map(resolve)) {
        const schema = resolve(parameter.schema);
        const plusy = ['date-time', 'email'].includes(schema?.format) || String(schema?.pattern ?? '').startsWith('^\\+');
        if (parameter.in === 'query' && plusy) names.add(parameter.name);
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
function integerBounds(spec: Record<string, any>, name: string): Bounds {
  const schema = spec.components.parameters[name].schema;
  for (const key of ['default', 'minimum', 'maximum']) {
    if (!Number.isInteger(schema[key])) throw new Error(`openapi.yaml: parameter ${name} has no integer ${key}`);
  }
  return Object.freeze({ default: schema.default, minimum: schema.minimum, maximum: schema.maximum });
}

/**
 * The first example of each named schema that has a pattern (e.g. Phone), by pattern: a value that
 * fails the pattern is told what a good one looks like.
 */
function patternExamples(spec: Record<string, any>): Map<string, string> {
  const found = new Map<string, string>();
  for (const schema of Object.values<Record<string, any>>(spec.components.schemas)) {
    if (typeof schema.pattern === 'string' && typeof schema.examples?.[0] === 'string') found.set(schema.pattern, schema.examples[0]);
  }
  return found;
}

export const spec = loadSpec();
export const specJson = JSON.stringify(spec);
export const contractOperations: readonly Operation[] = listOperations(spec);
export const literalPlusQuery: ReadonlySet<string> = literalPlusQueryParameters(spec);
const examplesByPattern = patternExamples(spec);

/** A validator's message, with an example appended when it is a pattern the contract gives one for. */
export function withExample(message: string): string {
  const pattern = /^must match pattern "(.*)"$/.exec(message)?.[1];
  const example = pattern === undefined ? undefined : examplesByPattern.get(pattern);
  return example === undefined ? message : `${message}, e.g. ${example}`;
}

/** `page` and `limit` of every list, as the contract's Page and Limit parameters define them. */
export const pageBounds: Bounds = integerBounds(spec, 'Page');
export const limitBounds: Bounds = integerBounds(spec, 'Limit');
