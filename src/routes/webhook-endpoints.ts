// Handlers of the webhook endpoint operations (the integrator's endpoints and their delivery logs;
// Meta's inbound webhooks are src/routes/webhooks.ts).
import * as endpoints from '../events/endpoints.js';
import { notFound } from '../errors.js';
import { paging, type Handlers } from './handler.js';

export const webhookEndpointHandlers: Pick<
  Handlers,
  | 'listWebhookEndpoints'
  | 'createWebhookEndpoint'
  | 'getWebhookEndpoint'
  | 'updateWebhookEndpoint'
  | 'deleteWebhookEndpoint'
  | 'listWebhookDeliveries'
  | 'retryWebhookDelivery'
> = {
  async listWebhookEndpoints({ db, auth, query }) {
    const { page, limit } = paging(query);
    return { status: 200, body: await endpoints.listEndpoints(db, auth.workspaceId, page, limit) };
  },

  async createWebhookEndpoint({ db, auth, body, services }) {
    const created = await endpoints.createEndpoint(db, services.secrets, auth.workspaceId, body, services.allowPrivateUrls ?? false);
    return { status: 201, body: created, holdsSecret: true };
  },

  async getWebhookEndpoint({ db, auth, params }) {
    const endpoint = await endpoints.getEndpoint(db, auth.workspaceId, params.id);
    if (!endpoint) throw notFound('Webhook endpoint');
    return { status: 200, body: endpoint };
  },

  async updateWebhookEndpoint({ db, auth, params, body, services }) {
    const endpoint = await endpoints.updateEndpoint(db, auth.workspaceId, params.id, body, services.allowPrivateUrls ?? false);
    if (!endpoint) throw notFound('Webhook endpoint');
    return { status: 200, body: endpoint };
  },

  async deleteWebhookEndpoint({ db, auth, params }) {
    if (!(await endpoints.deleteEndpoint(db, auth.workspaceId, params.id))) throw notFound('Webhook endpoint');
    return { status: 204 };
  },

  async listWebhookDeliveries({ db, auth, params, query }) {
    const { page, limit } = paging(query);
    const result = await endpoints.listDeliveries(db, auth.workspaceId, params.id, page, limit);
    if (result.total === 0 && !(await endpoints.endpointExists(db, auth.workspaceId, params.id))) throw notFound('Webhook endpoint');
    return { status: 200, body: result };
  },

  async retryWebhookDelivery({ db, auth, params }) {
    const delivery = await endpoints.retryDelivery(db, auth.workspaceId, params.id, params.deliveryId);
    if (!delivery) throw notFound('Delivery');
    return { status: 202, body: delivery };
  },
};
