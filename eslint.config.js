// Lint: typescript-eslint's type-checked recommended rules over every TypeScript folder, promises
// included (a floating promise is a failure nobody hears of), and the room boundaries of src/ (the
// README's layout section), so a broken one fails `npm run lint` and shows in an editor. A rule
// turned off says why.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/** The rooms of src/: a folder each, with a vocabulary of its own. */
const ROOMS = ['ai', 'automations', 'channels', 'db', 'events', 'jobs', 'media', 'middleware', 'outbound', 'routes', 'services', 'stream'];

/** A no-restricted-imports pattern refusing a relative import of these rooms (from src/ or from a room in it). */
const rooms = (names, message) => ({ regex: `^(?:\\./|(?:\\.\\./)+)(?:${names.join('|')})/`, message });

/** SecretBox and parseKey seal webhook endpoints' secrets and stored answers too: they live in src/secrets.ts. */
const SECRETS = {
  regex: '(?:^|/)channels/secrets(?:\\.js)?$',
  message: 'Secrets live in src/secrets.ts: nothing outside src/channels/ imports channels/secrets.',
};

/** What each room must not import, and why. */
const BOUNDARIES = {
  db: {
    files: ['src/db/**/*.ts'],
    ignores: ['src/db/migrations/**'],
    forbids: ROOMS.filter((room) => room !== 'db'),
    message: 'src/db reads and writes tables for the rooms: it imports no capability, route or service.',
    also: [{ regex: '^\\./migrations/', message: 'Only migrate.ts runs the migrations.' }],
  },
  jobs: {
    files: ['src/jobs/**/*.ts'],
    forbids: ['ai', 'automations', 'channels', 'events', 'media', 'services', 'routes', 'stream', 'outbound'],
    message: 'src/jobs is the queue, infrastructure only: capabilities register their handlers with it at start-up, it imports none of them.',
  },
  events: {
    files: ['src/events/**/*.ts'],
    forbids: ['automations', 'ai', 'channels'],
    message: 'The event log knows no consumer: automations, AI replies and deliveries are registered with it at start-up.',
  },
  services: {
    files: ['src/services/**/*.ts'],
    forbids: ['channels', 'routes', 'middleware', 'ai', 'automations', 'stream'],
    message:
      'src/services holds the use cases: adapters (channels/, routes/) and capabilities (ai/, automations/) call it, it calls none of them back (consumers join through the event log’s fan-out).',
  },
  channels: {
    files: ['src/channels/**/*.ts'],
    forbids: ['ai', 'automations'],
    message: 'src/channels is what is Meta’s (verifying, parsing, Graph bodies, channel settings): it knows no AI agent and no automation.',
  },
  config: {
    files: ['src/config.ts'],
    forbids: ROOMS,
    message: 'config.ts reads the environment once and imports no room.',
  },
};

const restrict = (patterns) => ({ 'no-restricted-imports': ['error', { patterns }] });

/** The rules of a file of `room` that may not import `forbids`: its room's, and the secrets' outside channels/. */
const roomRules = (room, forbids, also = []) => restrict([rooms(forbids, BOUNDARIES[room].message), ...also, ...(room === 'channels' ? [] : [SECRETS])]);

/** The boundaries as flat-config objects; a later object's rule replaces an earlier one's for the files both match. */
const boundaries = [
  { files: ['**/*.ts'], ignores: ['src/channels/**'], rules: restrict([SECRETS]) },
  ...Object.entries(BOUNDARIES).map(([room, { files, ignores, forbids, also }]) => ({
    files,
    ...(ignores ? { ignores } : {}),
    rules: roomRules(room, forbids, also),
  })),
  { files: ['src/db/migrate.ts'], rules: roomRules('db', BOUNDARIES.db.forbids) },
  {
    files: ['src/db/migrations/**/*.ts'],
    rules: restrict([{ regex: '^\\.', message: 'A migration is frozen in time: it imports nothing of the application, only packages (kysely).' }]),
  },
  {
    // A module reached by import() escapes the rules above: relative modules are imported statically.
    files: ['src/**/*.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        { selector: 'ImportExpression[source.value=/^\\./]', message: 'Import a module of src/ statically, where the room boundaries see it.' },
        { selector: 'TSImportType[source.value=/^\\./]', message: 'Import a type of src/ with `import type`, where the room boundaries see it.' },
      ],
    },
  },
];

export default tseslint.config(
  { ignores: ['generated/', 'dist/', 'client/dist/', 'node_modules/', 'data/', 'coverage/', 'bench/results/', 'test/generated-client/'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: { allowDefaultProject: ['eslint.config.js', 'scripts/*.mjs'] }, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      // A leading underscore marks a value left out on purpose (a rest sibling, an unused argument).
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_', ignoreRestSiblings: true },
      ],
      // Passing on an abort signal's reason or a caught value as it came is what rejecting should do.
      '@typescript-eslint/prefer-promise-reject-errors': ['error', { allowThrowingAny: true, allowThrowingUnknown: true }],
    },
  },
  {
    files: ['eslint.config.js', 'scripts/*.mjs'],
    ...tseslint.configs.disableTypeChecked,
  },
  {
    // Migrations are frozen in time: they take Kysely<any>, never the app's current schema.
    files: ['src/db/migrations/**', 'src/db/migrate.ts', 'test/migrations.test.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
  {
    // Tests read response bodies, recorded requests and log lines as untyped JSON and assert on them; typing each is not worth it.
    files: ['test/**'],
    rules: {
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/no-explicit-any': 'off',
      // Doubles and fuzz properties implement Promise-returning interfaces, often without awaiting anything.
      '@typescript-eslint/require-await': 'off',
    },
  },
  ...boundaries,
);
