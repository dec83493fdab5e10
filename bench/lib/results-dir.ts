// Where a bench writes its tables: BENCH_RESULTS_DIR when set; bench/results (tracked) when the run is
// asked to keep them (BENCH_KEEP=1); otherwise bench/results/runs, which git ignores, so a bench run
// leaves `git status` clean.
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

/** The directory this run's result files go to (not created here). */
export function resultsDir(): string {
  if (process.env.BENCH_RESULTS_DIR) return path.resolve(process.env.BENCH_RESULTS_DIR);
  const kept = process.env.BENCH_KEEP === '1';
  return path.join(ROOT, 'bench', 'results', ...(kept ? [] : ['runs']));
}
