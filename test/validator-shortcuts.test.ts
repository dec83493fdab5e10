// The start-up shortcuts of the contract validator (src/middleware/validator-shortcuts.ts): each is
// installed on the express-openapi-validator this repository depends on (an update that moves its
// internals fails here, not silently in start-up time), and the contract the validator works from is
// the same with and without them.
import { createRequire } from 'node:module';
import { isDeepStrictEqual } from 'node:util';
import { describe, expect, it } from 'vitest';
import { loadSpec } from '../src/contract.js';
import { contractValidator, validatorOptions } from '../src/middleware/validator.js';
import {
  installValidatorShortcuts,
  reachedComponents,
  refsAreLocalAndDirect,
  validatorShortcutNames,
  withoutValidatorShortcuts,
} from '../src/middleware/validator-shortcuts.js';

const require = createRequire(import.meta.url);
const eov = (file: string): Record<string, unknown> => require(`express-openapi-validator/dist/${file}`) as Record<string, unknown>;

interface Preprocessed {
  apiDoc: unknown;
  apiDocRes: unknown;
}

/** The package's own preprocessing of the contract, as the validator runs it (with response validation, so both documents are made). */
function preprocess(): Preprocessed {
  const { OpenApiValidator } = eov('openapi.validator.js') as { OpenApiValidator: new (options: unknown) => { ajvOpts: { preprocessor: unknown } } };
  const { SchemaPreprocessor } = eov('middlewares/parsers/schema.preprocessor.js') as {
    SchemaPreprocessor: new (doc: unknown, ajvOptions: unknown, responses: unknown) => { preProcess(): Preprocessed };
  };
  const options = validatorOptions({ validateResponses: true });
  const ajvOptions = new OpenApiValidator({ ...options }).ajvOpts.preprocessor;
  return new SchemaPreprocessor(options.apiSpec, ajvOptions, { removeAdditional: false, coerceTypes: false, onError: null }).preProcess();
}

describe('the contract validator skips at start what changes nothing', () => {
  it('installs every shortcut on the express-openapi-validator in node_modules', () => {
    contractValidator({ validateResponses: false });
    expect(installValidatorShortcuts().sort()).toEqual([...validatorShortcutNames].sort());
  });

  it("bundling the contract is a no-op: every $ref is local and direct, and the package's bundler returns it unchanged", async () => {
    const spec = loadSpec();
    expect(refsAreLocalAndDirect(spec)).toBe(true);
    const $RefParser = createRequire(require.resolve('express-openapi-validator'))('@apidevtools/json-schema-ref-parser') as {
      bundle(doc: unknown): Promise<unknown>;
    };
    expect(isDeepStrictEqual(await $RefParser.bundle(loadSpec()), spec)).toBe(true);
  });

  it('refuses to skip bundling a document with an external, indirect or dangling $ref', () => {
    const doc = (ref: string): unknown => ({ a: { b: { type: 'string' }, alias: { $ref: '#/a/b' } }, c: { $ref: ref } });
    expect(refsAreLocalAndDirect(doc('#/a/b'))).toBe(true);
    expect(refsAreLocalAndDirect(doc('other.yaml#/a/b'))).toBe(false);
    expect(refsAreLocalAndDirect(doc('#/a/alias'))).toBe(false);
    expect(refsAreLocalAndDirect(doc('#/c/x'))).toBe(false);
    expect(refsAreLocalAndDirect(doc('#/a/missing'))).toBe(false);
  });

  it('preprocesses the contract into the same request and response documents as the package as published', () => {
    installValidatorShortcuts();
    const shortcut = preprocess();
    const published = withoutValidatorShortcuts(preprocess);
    expect(isDeepStrictEqual(shortcut.apiDoc, published.apiDoc)).toBe(true);
    expect(isDeepStrictEqual(shortcut.apiDocRes, published.apiDocRes)).toBe(true);
  });
});

describe("the response validators are built from the components an operation's responses reach", () => {
  type Validator = ((data: unknown) => boolean) | Record<string, never>;
  interface ResponseValidatorLike {
    buildValidators(responses: unknown, key: string): Record<string, Record<string, Validator>>;
  }

  /** Every operation's response validators, built as the package does (with or without the shortcuts installed). */
  function buildAll(apiDocRes: { paths: Record<string, Record<string, { responses?: unknown }>> }): Map<string, Record<string, Record<string, Validator>>> {
    const { OpenApiValidator } = eov('openapi.validator.js') as { OpenApiValidator: new (options: unknown) => { ajvOpts: { response: unknown } } };
    const { ResponseValidator } = eov('middlewares/openapi.response.validator.js') as {
      ResponseValidator: new (doc: unknown, ajvOptions: unknown, eov: unknown) => ResponseValidatorLike;
    };
    const options = validatorOptions({ validateResponses: true });
    const validator = new ResponseValidator(apiDocRes, new OpenApiValidator({ ...options }).ajvOpts.response, options.validateResponses);
    const built = new Map<string, Record<string, Record<string, Validator>>>();
    for (const [path, item] of Object.entries(apiDocRes.paths)) {
      for (const [method, operation] of Object.entries(item)) {
        if (operation?.responses) built.set(`${method} ${path}`, validator.buildValidators(operation.responses, `${method}-${path}`));
      }
    }
    return built;
  }

  /** The bodies a response validator is tried on: the operation's examples for that status and some that fit nothing. */
  function bodies(
    responses: Record<string, { content?: Record<string, { example?: unknown; examples?: Record<string, { value?: unknown }> }> }>,
    code: string,
  ): unknown[] {
    const content = Object.values(responses[code]?.content ?? {});
    const examples = content.flatMap((media) => [
      ...(media.example !== undefined ? [media.example] : []),
      ...Object.values(media.examples ?? {}).map((e) => e.value),
    ]);
    const broken = examples
      .filter((e): e is Record<string, unknown> => typeof e === 'object' && e !== null && !Array.isArray(e))
      .map((e) => ({ ...e, id: 42, createdAt: false }));
    return [...examples, ...broken, {}, [], null, 'x', { data: [{}], pagination: {} }, { error: { code: 'x', message: 'y' } }];
  }

  it("answers every operation's example responses and broken ones as the package as published does", () => {
    installValidatorShortcuts();
    const shortcut = buildAll(preprocess().apiDocRes as never);
    const published = withoutValidatorShortcuts(() => buildAll(preprocess().apiDocRes as never));
    // The examples as written (the preprocessed documents leave them out).
    const spec = loadSpec() as { paths: Record<string, Record<string, { responses?: Record<string, never> }>> };
    let tried = 0;
    let valid = 0;
    for (const [operation, validators] of published) {
      const [method, path] = operation.split(' ') as [string, string];
      const responses = spec.paths[path]?.[method]?.responses ?? {};
      for (const [code, byType] of Object.entries(validators)) {
        for (const [type, validate] of Object.entries(byType)) {
          const other = shortcut.get(operation)?.[code]?.[type];
          expect(typeof other, `${operation} ${code} ${type}`).toBe(typeof validate);
          if (typeof validate !== 'function') continue;
          for (const body of bodies(responses, code)) {
            const expected = validate({ response: body });
            expect((other as (data: unknown) => boolean)({ response: body }), `${operation} ${code} ${JSON.stringify(body).slice(0, 80)}`).toBe(expected);
            tried++;
            if (expected) valid++;
          }
        }
      }
    }
    // The comparison checked something: many operations, examples that pass and bodies that fail.
    expect(published.size).toBeGreaterThan(50);
    expect(valid).toBeGreaterThan(100);
    expect(tried - valid).toBeGreaterThan(500);
    // It compiles every operation's response validators twice, all CPU: 14 s on this project's quiet 2-core machine, 33 s
    // with the cores shared (past the suite's 30 s default), and no part of it waits on anything else.
  }, 90_000);

  it('refuses to trim for a $ref outside the components, or one that reaches nothing', () => {
    const spec = { components: { schemas: { A: { properties: { b: { $ref: '#/components/schemas/B' } } }, B: { type: 'string' }, C: { type: 'number' } } } };
    expect(reachedComponents(spec, { schema: { $ref: '#/components/schemas/A' } })).toEqual({
      components: { schemas: { A: spec.components.schemas.A, B: spec.components.schemas.B } },
    });
    expect(reachedComponents(spec, { schema: { $ref: '#/paths/x' } })).toBeUndefined();
    expect(reachedComponents(spec, { schema: { $ref: '#/components/schemas/Z' } })).toBeUndefined();
    expect(reachedComponents(spec, { schema: { $ref: 'other.yaml#/components/schemas/A' } })).toBeUndefined();
  });
});
