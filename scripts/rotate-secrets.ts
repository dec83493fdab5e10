// npm run --silent secrets:rotate: re-seals every channel's Meta secrets, every webhook endpoint's
// secret and every stored Idempotency-Key answer holding a secret (of the last 24 hours) under
// SECRETS_KEY, opening the old ones with SECRETS_KEY_PREVIOUS. Prints {keyId, resealed, remaining}
// (all of them together); once remaining is 0 (and every instance runs with the new SECRETS_KEY),
// SECRETS_KEY_PREVIOUS can be dropped.
import { createSecretBox } from '../src/secrets.js';
import { rotateChannelSecrets } from '../src/channels/settings.js';
import { rotateWebhookSecrets } from '../src/events/endpoints.js';
import { rotateSealedResults } from '../src/idempotency.js';
import { loadConfig } from '../src/config.js';
import { runCommand, UsageError } from './cli.js';

await runCommand(async (db) => {
  const config = loadConfig();
  if (!config.secretsKey) throw new UsageError('set SECRETS_KEY to the new key and SECRETS_KEY_PREVIOUS to the old one(s)');
  const box = createSecretBox(config.secretsKey, config.secretsKeyPrevious);
  const channels = await rotateChannelSecrets(db, box);
  const endpoints = await rotateWebhookSecrets(db, box);
  const results = await rotateSealedResults(db, box);
  return {
    keyId: channels.keyId,
    resealed: channels.resealed + endpoints.resealed + results.resealed,
    remaining: channels.remaining + endpoints.remaining + results.remaining,
  };
});
