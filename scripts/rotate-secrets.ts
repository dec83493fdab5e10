// npm run --silent secrets:rotate: re-seals every channel's Meta secrets under SECRETS_KEY, opening
// the old ones with SECRETS_KEY_PREVIOUS. Prints {keyId, resealed, remaining}; once remaining is 0
// (and every instance runs with the new SECRETS_KEY), SECRETS_KEY_PREVIOUS can be dropped.
import { createSecretBox } from '../src/channels/secrets.js';
import { rotateChannelSecrets } from '../src/channels/settings.js';
import { loadConfig } from '../src/config.js';
import { runCommand, UsageError } from './cli.js';

await runCommand(async (db) => {
  const config = loadConfig();
  if (!config.secretsKey) throw new UsageError('set SECRETS_KEY to the new key and SECRETS_KEY_PREVIOUS to the old one(s)');
  return rotateChannelSecrets(db, createSecretBox(config.secretsKey, config.secretsKeyPrevious));
});
