// Automations as the tests write them: the README's worked refund example, and a stage's id by name.
import type { components } from '../../generated/api.js';
import type { TestWorkspace } from './api.js';

/** The id of the workspace's stage named `name` (the funnel starts with Novo, Em atendimento, ...). */
export async function stageId(ws: TestWorkspace, name: string): Promise<string> {
  const { data } = await ws.api.GET('/stages');
  return data!.data.find((stage) => stage.name === name)!.id;
}

/** The README's first worked example: a customer writing about a refund moves to `stage`, labelled reembolso. */
export const refunds = (stage: string): components['schemas']['AutomationCreate'] => ({
  name: 'Pedidos de reembolso',
  trigger: { event: 'message.received' },
  conditions: {
    any: [
      { field: 'message.content', operator: 'contains', value: 'reembolso' },
      { field: 'message.content', operator: 'contains', value: 'estorno' },
    ],
  },
  actions: [
    { type: 'move_stage', stageId: stage },
    { type: 'add_labels', target: 'thread', labels: ['reembolso'] },
  ],
});
