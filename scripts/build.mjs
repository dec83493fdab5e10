// npm run build: compiles the service and the operator commands to dist/ (tsconfig.build.json, with
// source maps), copies the contract it was compiled against next to them (dist/openapi.yaml, which
// dist/src/contract.js reads as src/contract.ts reads ./openapi.yaml; and parsed, as dist/openapi.build.json, which
// reads much faster than the YAML parses), and stamps the build so
// scripts/run.mjs can tell a build older than its sources. Plain JavaScript: it runs before any build.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import process from 'node:process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const dist = path.join(root, 'dist');
const started = Date.now();
const tsc = spawnSync(process.execPath, [path.join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', path.join(root, 'tsconfig.build.json')], {
  stdio: 'inherit',
});
if (tsc.status !== 0) process.exit(tsc.status ?? 1);
const yaml = fs.readFileSync(path.join(root, 'openapi.yaml'), 'utf8');
fs.writeFileSync(path.join(dist, 'openapi.yaml'), yaml);
fs.writeFileSync(path.join(dist, 'openapi.build.json'), JSON.stringify(parse(yaml)));
fs.writeFileSync(path.join(dist, '.build-stamp'), `${new Date().toISOString()}\n`);
process.stderr.write(`built dist/ in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
