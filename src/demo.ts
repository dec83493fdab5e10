// The embedded default's demo: a workspace and key made at first start and kept under ./data, so
// every `npm start` can print a key that works (the key is stored hashed; this file is the only copy).
import fs from 'node:fs';
import path from 'node:path';
import { findActiveKey } from './db/api-keys.js';
import type { Db } from './db/database.js';
import { hashApiKey } from './keys.js';
import { provision, SCOPES, type Provisioned } from './provisioning.js';

export async function ensureDemoKey(db: Db, dataDir: string): Promise<Provisioned & { created: boolean }> {
  const file = path.join(dataDir, 'demo-key.json');
  if (fs.existsSync(file)) {
    const saved = JSON.parse(fs.readFileSync(file, 'utf8')) as Provisioned;
    if (await findActiveKey(db, hashApiKey(saved.apiKey))) return { ...saved, created: false };
  }
  const demo = await provision(db, { plan: 'pro', scopes: [...SCOPES], workspaceName: 'Demo' });
  fs.mkdirSync(dataDir, { recursive: true });
  fs.writeFileSync(file, `${JSON.stringify(demo, null, 2)}\n`, { mode: 0o600 });
  return { ...demo, created: true };
}
