// The contract, read once: the parsed openapi.yaml and the operations it declares.
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import type { operations } from '../generated/api.js';

export type OperationId = keyof operations;

export interface Operation {
  readonly operationId: OperationId;
  readonly method: 'get' | 'post' | 'patch' | 'put' | 'delete';
  /** The path as the contract writes it, e.g. /agents/{id}. */
  readonly path: string;
  /** The same path in Express syntax, e.g. /agents/:id. */
  readonly expressPath: string;
  /** Scopes the key must hold (all of them). */
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
    for (const method of METHODS) {
      const op = item[method];
      if (!op) continue;
      const security: Array<Record<string, string[]>> = op.security ?? spec.security ?? [];
      found.push({
        operationId: op.operationId,
        method,
        path,
        expressPath: path.replace(/\{(\w+)\}/g, ':$1'),
        scopes: security.flatMap((requirement) => requirement.bearerAuth ?? []),
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

export const spec = loadSpec();
export const specJson = JSON.stringify(spec);
export const contractOperations: readonly Operation[] = listOperations(spec);
export const literalPlusQuery: ReadonlySet<string> = literalPlusQueryParameters(spec);
