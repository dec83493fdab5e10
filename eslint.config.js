// Lint: typescript-eslint's type-checked recommended rules over every TypeScript folder, promises
// included (a floating promise is a failure nobody hears of). A rule turned off says why.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

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
);
