// npm run migrate: applies pending migrations to DATABASE_URL (or the embedded database).
import { migrateToLatest } from '../src/db/migrate.js';
import { runCommand } from './cli.js';

await runCommand(async (db) => ({ applied: await migrateToLatest(db) }), { migrateFirst: false });
