// The start-up shortcuts of the contract validator (src/middleware/validator-shortcuts.ts): each is
// installed on the express-openapi-validator this repository depends on (an update that moves its
// internals fails here, not silently in start-up time), and the contract the validator works from is
// the same with and without them.
import { createRequire } from 'node:module';
import { isDeepStrictEqual } from 'node:util';
import { describe, expect, it } from 'vitest';
import { loadSpec } from '../src/contract.js';
import { contractValidator, validatorOptions } from '../src/middleware/validator.js';
import { installValidatorShortcuts, refsAreLocalAndDirect, validatorShortcutNames, withoutValidatorShortcuts } from '../src/middleware/validator-shortcuts.js';

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
