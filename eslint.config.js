// ESLint 9 flat config. Rules here encode habits the code already keeps; test/layering.test.ts
// stays the backstop for what ESLint cannot say (cipher APIs by name, open-redirect shapes).
import js from '@eslint/js';
import prettier from 'eslint-config-prettier';
import n from 'eslint-plugin-n';
import globals from 'globals';
import tseslint from 'typescript-eslint';

const storeOnly = {
  name: 'better-sqlite3',
  message: 'Only src/store/ talks to the database: use the Store interface (src/store/types.ts).',
};

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', 'data/', 'test-artifacts/', 'bench/profiles/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { ...globals.node }, ecmaVersion: 2023, sourceType: 'module' },
    plugins: { n },
    rules: {
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      '@typescript-eslint/no-import-type-side-effects': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
      'n/prefer-node-protocol': 'error',
      eqeqeq: ['error', 'always', { null: 'ignore' }],
      // A handler declared before the server that calls it and assigned once it exists.
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
      'no-control-regex': 'off',
    },
  },
  {
    // A promise nobody awaits and nobody catches ends the process when it rejects (issue 19: one
    // upstream's answer did exactly that). `void` does not count as handling it: give it a `.catch`
    // (backgroundFailure from src/observability/process-guards.ts when there is nothing better to do).
    files: ['src/**/*.ts'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': ['error', { ignoreVoid: false }],
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: { arguments: false, attributes: false } }],
    },
  },
  {
    // Tests read whatever JSON-RPC and HTML bodies come back; typing each one would be ceremony.
    files: ['test/**/*.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
  {
    files: ['src/**/*.ts'],
    ignores: ['src/store/**', 'src/crypto/**'],
    rules: {
      'no-console': 'error',
      'no-restricted-imports': [
        'error',
        {
          paths: [
            storeOnly,
            { name: 'pg', message: storeOnly.message },
            { name: 'node:crypto', message: 'Only src/crypto/ uses node:crypto: take a helper from src/crypto/index.ts.' },
            { name: 'crypto', message: 'Only src/crypto/ uses node:crypto: take a helper from src/crypto/index.ts.' },
          ],
        },
      ],
    },
  },
  {
    files: ['src/store/**/*.ts'],
    rules: {
      'no-console': 'error',
      'no-restricted-imports': [
        'error',
        { paths: [{ name: 'node:crypto', message: 'Only src/crypto/ uses node:crypto: take a helper from src/crypto/index.ts.' }] },
      ],
    },
  },
  {
    files: ['src/crypto/**/*.ts'],
    rules: {
      'no-console': 'error',
      'no-restricted-imports': ['error', { paths: [storeOnly, { name: 'pg', message: storeOnly.message }] }],
    },
  },
  {
    // The one module that filters what a library prints on the console (oidc-provider's notes).
    files: ['src/dev/oidc-provider.ts'],
    rules: { 'no-console': 'off' },
  },
  prettier,
);
