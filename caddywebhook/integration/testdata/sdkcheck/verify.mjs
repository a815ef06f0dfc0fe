// The providers' own webhook verifiers, as an app that sits behind Caddy
// would call them: the integration suite (e2e_resign_test.go) runs this
// server as the upstream of http targets that sign again (resign), and
// reads one JSON line per request from its stdout.
//
// POST /<scheme>/<anything>: the request is verified with the scheme's
// official SDK and the secret SDKCHECK_SECRETS gives it ({"github": …}),
// as an unchanged handler does. A request that verifies is answered 503 on
// its first attempt (X-Webhook-Attempt: 1), so that Caddy retries it, and
// 200 on the later ones; one that does not is answered 401. Every request
// prints {"scheme", "attempt", "ok", "error", "id", "type", …}: what the
// handler saw.
//
// It needs `npm ci` in this directory; .ci/run does it.

import http from 'node:http';
import { verify as verifyGitHub } from '@octokit/webhooks-methods';
import Stripe from 'stripe';
import { Webhook } from 'standardwebhooks';
import '@shopify/shopify-api/adapters/node';
import { shopifyApi, ApiVersion } from '@shopify/shopify-api';
import bolt from '@slack/bolt';
import twilio from 'twilio';

const secrets = JSON.parse(process.env.SDKCHECK_SECRETS || '{}');
const stripe = new Stripe('sk_test_unused');
const shopify = shopifyApi({
  apiKey: 'sdkcheck',
  apiSecretKey: secrets.shopify || 'unused',
  scopes: [],
  hostName: 'localhost',
  apiVersion: ApiVersion.October25,
  isEmbeddedApp: false,
  logger: { level: 0 },
});

const text = (body) => body.toString('utf8');

// Each check throws when the SDK refuses the request, and returns what the
// handler read from it.
const checks = {
  // https://github.com/octokit/webhooks-methods.js
  async github(req, body) {
    if (!(await verifyGitHub(secrets.github, text(body), req.headers['x-hub-signature-256'] || ''))) {
      throw new Error('@octokit/webhooks-methods: signature does not match');
    }
    return { id: req.headers['x-github-delivery'], type: req.headers['x-github-event'], hook: req.headers['x-github-hook-id'] };
  },
  // https://docs.stripe.com/webhooks#verify-official-libraries (tolerance 300 s)
  async stripe(req, body) {
    const event = stripe.webhooks.constructEvent(body, req.headers['stripe-signature'], secrets.stripe);
    return { id: event.id, type: event.type };
  },
  // https://github.com/standard-webhooks/standard-webhooks (tolerance 5 min)
  async standard(req, body) {
    const payload = new Webhook(secrets.standard).verify(text(body), req.headers);
    return { id: req.headers['webhook-id'], type: payload.type };
  },
  // Polar's SDKs hand a Standard Webhooks verifier the base64 of the
  // secret's bytes (validateEvent in @polar-sh/sdk/webhooks).
  async polar(req, body) {
    const payload = new Webhook(Buffer.from(secrets.polar, 'utf8').toString('base64')).verify(text(body), req.headers);
    return { id: req.headers['webhook-id'], type: payload.type };
  },
  // https://github.com/Shopify/shopify-app-js/tree/main/packages/apps/shopify-api (webhooks.validate)
  async shopify(req, body, res) {
    const check = await shopify.webhooks.validate({ rawBody: text(body), rawRequest: req, rawResponse: res });
    if (!check.valid) {
      throw new Error(`@shopify/shopify-api: ${check.reason} ${(check.missingHeaders || []).join(',')}`);
    }
    return { id: req.headers['x-shopify-event-id'], type: req.headers['x-shopify-topic'], domain: check.domain, webhookId: check.webhookId, apiVersion: check.apiVersion };
  },
  // https://github.com/slackapi/bolt-js (verifySlackRequest, tolerance 5 min)
  async slack(req, body) {
    bolt.verifySlackRequest({
      signingSecret: secrets.slack,
      body: text(body),
      headers: {
        'x-slack-signature': req.headers['x-slack-signature'],
        'x-slack-request-timestamp': Number(req.headers['x-slack-request-timestamp']),
      },
    });
    const payload = JSON.parse(text(body));
    return { id: payload.event_id, type: payload.event && payload.event.type };
  },
  // https://www.twilio.com/docs/usage/webhooks/webhooks-security (validateRequest over the URL called and the form)
  async twilio(req, body) {
    const params = Object.fromEntries(new URLSearchParams(text(body)));
    const url = `http://${req.headers.host}${req.url}`;
    if (!twilio.validateRequest(secrets.twilio, req.headers['x-twilio-signature'] || '', url, params)) {
      throw new Error('twilio.validateRequest: signature does not match');
    }
    return { id: params.MessageSid };
  },
};

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', async () => {
    const body = Buffer.concat(chunks);
    const scheme = req.url.split('/')[1];
    const attempt = Number(req.headers['x-webhook-attempt'] || 0);
    const line = { scheme, attempt, delivery: req.headers['x-webhook-delivery-id'] };
    let status = 401;
    try {
      const check = checks[scheme];
      if (!check) {
        throw new Error(`no check for ${scheme}`);
      }
      Object.assign(line, await check(req, body, res), { ok: true });
      status = attempt === 1 ? 503 : 200;
    } catch (err) {
      Object.assign(line, { ok: false, error: String(err && err.message ? err.message : err) });
    }
    process.stdout.write(JSON.stringify(line) + '\n');
    res.writeHead(status, { 'Content-Type': 'text/plain' });
    res.end(status === 200 ? 'ok' : String(status));
  });
});

server.listen(0, '127.0.0.1', () => {
  process.stdout.write(JSON.stringify({ listening: server.address().port }) + '\n');
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
