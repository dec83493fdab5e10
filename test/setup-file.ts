// Before each test file, in its worker: a database of the file's own (test/helpers/server.ts). Workers
// keep their modules from one file to the next (isolate: false in vitest.config.ts), so the clone is
// made here, per file, and not when server.ts is first imported.
import { useFileDatabase } from './helpers/databases.js';

await useFileDatabase();
