// What express-openapi-validator (5.6) does on reading a contract that changes nothing for this
// service's, skipped: before it, reading the contract was half of the service's start (BENCHMARKS.md,
// "Issue 38: start and metrics"). Four things, each a method or class of the package replaced by one
// that does the same minus the unneeded work:
// - it bundles the document it is given (json-schema-ref-parser crawls every `$ref` to gather external
//   files into one), which changes nothing in a document whose every `$ref` is a local pointer
//   reaching its target through no other `$ref`, as the contract's are: checked before skipping it
//   (refsAreLocalAndDirect), and test/validator-shortcuts.test.ts checks the bundler returns the
//   contract unchanged;
// - it compiles OpenAPI's own meta-schema into a validator even with `validateApiSpec: false`, and
//   then never runs it (the contract is linted in CI instead: npm run lint:contract);
// - its schema preprocessor finds the schema each `#/components/schemas/X` names through Ajv's
//   `getSchema`, which compiles that schema into a validator only to hand back the object it was
//   given; those validators belong to an Ajv instance then dropped (requests' validators are compiled
//   by another one, each on its operation's first request). The object is read from the Ajv's
//   `schemas`, where getSchema would have found it, without compiling;
// - the preprocessor compiles a validator for each branch of a tagged union up front; it is compiled
//   on its first use instead (by a request whose body is that union, if ever);
// - outside production it validates responses, and builds an operation's response validators on its
//   first response: one schema per status code, each carrying the whole contract (its `paths` and
//   every component) for its `$ref`s to resolve in, which Ajv walks key by key when it adds the
//   schema: 200-300 ms of one hold of the event loop per operation (the contract is 400 KB), the
//   longest a test of the loop saw. It is given the components the operation's responses reach
//   instead (the `$ref`s followed from them), the same schemas for every `$ref` that can be
//   resolved, when every `$ref` is `#/components/...`.
// What the validator checks is unchanged (test/validator-shortcuts.test.ts compares the preprocessed
// contract with and without them). Should an update of the package move these internals, a shortcut
// whose target is missing steps aside (the validator works, only starts slower) and the test fails,
// so the update is noticed.
import { createRequire } from 'node:module';

type Validate = ((data: unknown) => boolean) & { errors?: unknown };
interface Preprocessor {
  ajv: { compile(schema: unknown): Validate; schemas?: Record<string, { schema?: unknown } | string | undefined> };
  resolvedSchemaCache: Map<string, unknown>;
}
type Method = (this: never, ...args: never[]) => unknown;

/** True when every `$ref` of `doc` is `#/...` and reaches a node that is no `$ref`, through none: bundling it is a no-op. */
export function refsAreLocalAndDirect(doc: unknown): boolean {
  const refs = new Set<string>();
  const walk = (node: unknown): void => {
    if (Array.isArray(node)) node.forEach(walk);
    else if (typeof node === 'object' && node !== null) {
      const ref = (node as { $ref?: unknown }).$ref;
      if (ref !== undefined) refs.add(typeof ref === 'string' ? ref : '');
      for (const value of Object.values(node)) walk(value);
    }
  };
  walk(doc);
  for (const ref of refs) {
    if (!ref.startsWith('#/')) return false;
    let node = doc as Record<string, unknown> | undefined;
    for (const part of ref.slice(2).split('/')) {
      if (typeof node !== 'object' || node === null || '$ref' in node) return false;
      const key = decodeURIComponent(part).replace(/~1/g, '/').replace(/~0/g, '~');
      if (!Object.hasOwn(node, key)) return false;
      node = node[key] as Record<string, unknown> | undefined;
    }
    if (typeof node !== 'object' || node === null || '$ref' in node) return false;
  }
  return true;
}

/**
 * The part of `spec` that `root`'s `$ref`s reach, followed transitively: `{ components }` holding each
 * named component reached (whole, as in `spec`), or undefined when a `$ref` is not `#/components/<kind>/<name>...`.
 */
export function reachedComponents(
  spec: { components?: Record<string, Record<string, unknown>> },
  root: unknown,
): { components: Record<string, Record<string, unknown>> } | undefined {
  const components: Record<string, Record<string, unknown>> = {};
  const pending: unknown[] = [root];
  while (pending.length > 0) {
    const node = pending.pop();
    if (Array.isArray(node)) {
      pending.push(...(node as unknown[]));
      continue;
    }
    if (typeof node !== 'object' || node === null) continue;
    const ref = (node as { $ref?: unknown }).$ref;
    if (ref !== undefined) {
      const parts = typeof ref === 'string' ? ref.split('/') : [];
      if (parts.length < 4 || parts[0] !== '#' || parts[1] !== 'components') return undefined;
      const [kind, name] = [parts[2]!, decodeURIComponent(parts[3]!).replace(/~1/g, '/').replace(/~0/g, '~')];
      const target = spec.components?.[kind]?.[name];
      if (target === undefined) return undefined;
      if (!(kind in components && Object.hasOwn(components[kind]!, name))) {
        (components[kind] ??= {})[name] = target;
        pending.push(target);
      }
    }
    pending.push(...Object.values(node as Record<string, unknown>));
  }
  return { components };
}

interface Shortcut {
  /** A file of the package (under dist/), the object in it, and the property replaced. */
  file: string;
  target: (module: Record<string, unknown>) => Record<string, unknown> | undefined;
  key: string;
  replace: (original: Method) => Method;
}

const SHORTCUTS: Record<string, Shortcut> = {
  bundle: {
    file: 'framework/index.js',
    target: (m) => (m.OpenAPIFramework as { prototype?: Record<string, unknown> } | undefined)?.prototype,
    key: 'loadSpec',
    replace: (loadSpec) =>
      function (this: unknown, filePath: unknown, refParser?: { mode?: string }): unknown {
        const bundling = (refParser?.mode ?? 'bundle') === 'bundle';
        if (bundling && typeof filePath === 'object' && filePath !== null && refsAreLocalAndDirect(filePath)) return Promise.resolve(filePath);
        return (loadSpec as (this: unknown, ...args: unknown[]) => unknown).call(this, filePath, refParser);
      },
  },
  metaSchema: {
    file: 'framework/openapi.schema.validator.js',
    target: (m) => m,
    key: 'OpenAPISchemaValidator',
    replace: (Original) =>
      function OpenAPISchemaValidator(options: { validateApiSpec?: boolean }): unknown {
        if (options.validateApiSpec) return new (Original as unknown as new (options: unknown) => unknown)(options);
        return { validate: () => ({ errors: [] }) };
      },
  },
  schemaLookup: {
    file: 'middlewares/parsers/schema.preprocessor.js',
    target: (m) => (m.SchemaPreprocessor as { prototype?: Record<string, unknown> } | undefined)?.prototype,
    key: 'resolveSchema',
    replace: (resolveSchema) =>
      function (this: Preprocessor, schema: unknown): unknown {
        const ref = (schema as { $ref?: unknown } | null | undefined)?.$ref;
        if (typeof ref === 'string' && ref.startsWith('#/components/schemas/') && !this.resolvedSchemaCache.has(ref)) {
          const registered = this.ajv.schemas?.[ref];
          if (typeof registered === 'object' && registered.schema !== undefined) {
            this.resolvedSchemaCache.set(ref, registered.schema);
            return registered.schema;
          }
        }
        return (resolveSchema as (this: Preprocessor, schema: unknown) => unknown).call(this, schema);
      },
  },
  lazyBranches: {
    file: 'middlewares/parsers/schema.preprocessor.js',
    target: (m) => (m.SchemaPreprocessor as { prototype?: Record<string, unknown> } | undefined)?.prototype,
    key: 'preProcess',
    replace: (preProcess) =>
      function (this: Preprocessor): unknown {
        // Only the preprocessor's own compiles (the union branches) become lazy; this Ajv is its own.
        const ajv = this.ajv;
        const own = Object.hasOwn(ajv, 'compile');
        const compile = ajv.compile.bind(ajv);
        ajv.compile = (schema: unknown): Validate => {
          let compiled: Validate | undefined;
          const validate: Validate = (data: unknown): boolean => {
            compiled ??= compile(schema);
            const valid = compiled(data);
            validate.errors = compiled.errors;
            return valid;
          };
          return validate;
        };
        try {
          return (preProcess as (this: Preprocessor) => unknown).call(this);
        } finally {
          if (own) ajv.compile = compile;
          else delete (ajv as { compile?: unknown }).compile;
        }
      },
  },
  responseComponents: {
    file: 'middlewares/openapi.response.validator.js',
    target: (m) => (m.ResponseValidator as { prototype?: Record<string, unknown> } | undefined)?.prototype,
    key: 'buildValidators',
    replace: (buildValidators) =>
      function (this: { spec: { components?: Record<string, Record<string, unknown>>; paths?: unknown } }, responses: unknown, key: unknown): unknown {
        const spec = this.spec;
        const reached = reachedComponents(spec, responses);
        if (!reached) return (buildValidators as (this: unknown, ...args: unknown[]) => unknown).call(this, responses, key);
        // The schemas built read `this.spec` only while they are built (and compiled, within it).
        this.spec = { ...spec, paths: {}, components: reached.components };
        try {
          return (buildValidators as (this: unknown, ...args: unknown[]) => unknown).call(this, responses, key);
        } finally {
          this.spec = spec;
        }
      },
  },
};

/** Each shortcut's original, while it is installed. */
const installed = new Map<string, { object: Record<string, unknown>; original: unknown }>();

/** Installs the shortcuts (once per process); the names of those installed. */
export function installValidatorShortcuts(): string[] {
  const require = createRequire(import.meta.url);
  for (const [name, shortcut] of Object.entries(SHORTCUTS)) {
    if (installed.has(name)) continue;
    let module: Record<string, unknown>;
    try {
      module = require(`express-openapi-validator/dist/${shortcut.file}`) as Record<string, unknown>;
    } catch {
      continue;
    }
    const object = shortcut.target(module);
    const original = object?.[shortcut.key];
    if (!object || typeof original !== 'function') continue;
    object[shortcut.key] = shortcut.replace(original as Method);
    installed.set(name, { object, original });
  }
  return [...installed.keys()];
}

/** Runs `fn` with the package as published (the shortcuts removed meanwhile): for the test that compares the two. */
export function withoutValidatorShortcuts<T>(fn: () => T): T {
  const removed = [...installed];
  for (const [name, { object, original }] of removed) {
    object[SHORTCUTS[name]!.key] = original;
    installed.delete(name);
  }
  try {
    return fn();
  } finally {
    for (const [name, entry] of removed) {
      entry.object[SHORTCUTS[name]!.key] = SHORTCUTS[name]!.replace(entry.original as Method);
      installed.set(name, entry);
    }
  }
}

export const validatorShortcutNames = Object.keys(SHORTCUTS);
