// Shared by the operator commands: configuration, database, and the one-JSON-object-on-stdout rule.
import { ConfigError, loadConfig } from '../src/config.js';
import { createDatabase, type Db } from '../src/db/database.js';
import { migrateToLatest } from '../src/db/migrate.js';

export class UsageError extends Error {}

/**
 * Why a command that writes keys refuses to run on the embedded database: PGlite serves one process,
 * so a key written here would never reach a running `npm start`, nor survive into it.
 */
const withoutDatabaseUrl = (command: string): string =>
  `${command} needs DATABASE_URL (PostgreSQL), the database the service reads.\n` +
  'Without it the service runs on an embedded database that only its own process can open: a key written here would\n' +
  'never reach `npm start`. On the embedded database use the demo key `npm start` prints (kept in ./data/demo-key.json);\n' +
  `for a PostgreSQL deployment: DATABASE_URL=postgres://user@host:5432/db npm run --silent ${command} -- ...`;

/**
 * Runs a command against the configured database and prints its result as JSON. Pending
 * migrations are applied first unless the command is the migration itself. Exit codes: 0 done,
 * 2 bad arguments or configuration, 1 anything else.
 */
export async function runCommand(run: (db: Db) => Promise<unknown>, options: { migrateFirst?: boolean; needsDatabaseUrl?: string } = {}): Promise<void> {
  let db: Db | undefined;
  let code = 0;
  try {
    const config = loadConfig();
    if (options.needsDatabaseUrl && !config.databaseUrl) throw new UsageError(withoutDatabaseUrl(options.needsDatabaseUrl));
    db = createDatabase({ databaseUrl: config.databaseUrl, pgliteDir: config.pgliteDir, poolSize: 2 });
    if (options.migrateFirst !== false) await migrateToLatest(db);
    const result = await run(db);
    process.stdout.write(`${JSON.stringify(result)}\n`);
  } catch (err) {
    process.stderr.write(`error: ${err instanceof Error ? err.message : String(err)}\n`);
    code = err instanceof UsageError || err instanceof ConfigError ? 2 : 1;
  } finally {
    await db?.destroy();
  }
  // Set last: closing PGlite (its WebAssembly runtime) resets process.exitCode.
  process.exitCode = code;
}
