// npm run mock: Prism serves the contract on http://127.0.0.1:4010/v1 (MOCK_PORT to change), from
// the examples in openapi.yaml. Prism routes on the spec's paths alone, so it is given a copy whose
// paths carry the /v1 prefix: front-end teams then switch only the host, never the paths.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';
import { loadSpec } from '../src/contract.js';

const port = process.env.MOCK_PORT ?? '4010';
const spec = loadSpec();
spec.paths = Object.fromEntries(Object.entries(spec.paths as Record<string, unknown>).map(([p, item]) => [`/v1${p}`, item]));
spec.servers = [{ url: `http://127.0.0.1:${port}`, description: 'Prism mock' }];

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'support-funnel-mock-'));
const file = path.join(dir, 'openapi.yaml');
fs.writeFileSync(file, stringify(spec));

const prism = fileURLToPath(new URL('../node_modules/.bin/prism', import.meta.url));
const child = spawn(prism, ['mock', '--host', '127.0.0.1', '--port', port, file], { stdio: 'inherit' });
const stop = (signal: NodeJS.Signals) => child.kill(signal);
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
child.on('exit', (code) => {
  fs.rmSync(dir, { recursive: true, force: true });
  process.exit(code ?? 0);
});
