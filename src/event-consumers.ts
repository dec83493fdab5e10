// The composition root of the event log's fan-out: registers, once at start-up, the consumers of
// every recorded event beside the log's own webhook deliveries (events/record.ts): the automations
// an event triggers (automations/triggers.ts; a customer's message's run in its own transaction,
// automations/inline.ts, unless AUTOMATIONS_INLINE is false), the live stream's wake-up (stream/announce.ts: NOTIFY
// while the workspace is streamed) and, when AI_BASE_URL is set, the AI agents' replies to inbound
// messages (ai/replies.ts). The log (src/events/) imports none of them. The app and the workers both
// call it (either may record events; a process that records events without it announces them to no
// stream); calling it again with the same config changes nothing.
import { aiReplyConsumer, aiRepliesOf } from './ai/replies.js';
import { messageAutomationsInline } from './automations/inline.js';
import { automationTriggers } from './automations/triggers.js';
import type { Config } from './config.js';
import { registerEventConsumer } from './events/fan-out.js';
import { streamAnnouncement } from './stream/announce.js';

export function registerEventConsumers(config: Pick<Config, 'aiBaseUrl' | 'aiReplyDelayMs' | 'automationsInline'>): void {
  registerEventConsumer('automations', automationTriggers, config.automationsInline ? messageAutomationsInline : undefined);
  registerEventConsumer('stream', streamAnnouncement);
  const ai = aiRepliesOf(config);
  registerEventConsumer('ai-replies', ai && aiReplyConsumer(ai));
}
