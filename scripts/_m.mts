import { createDatabase } from '../src/db/database.js';
import { migrateToLatest } from '../src/db/migrate.js';
const db = createDatabase({ databaseUrl: process.env.DATABASE_URL, pgliteDir: 'memory://' });
console.log(await migrateToLatest(db));
console.log(await migrateToLatest(db));
await db.destroy();
