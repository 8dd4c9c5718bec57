// An OpenID provider (oidc-provider, pinned in package.json) for the
// per-user upstream credential tests (internal/e2e/peruser): people link
// their own accounts through the authorization-code grant, headless. The
// shared fixture (oidc-provider-fixture.mjs) issues client-credentials
// tokens only; this one signs people in.
//
//   node oidc-provider-peruser-fixture.mjs
//
// It listens on 127.0.0.1 on a free port and prints one JSON line,
// {"issuer": "http://127.0.0.1:PORT"}, once it serves.
//
// Clients register dynamically (the gateway does). The sign-in approves at
// once the account named by the authorization request's login_hint (the
// test's "browser" adds it), and consents to every scope and resource
// asked; without login_hint it answers 400. Access tokens are JWTs for the
// resource asked (RFC 8707), living an hour.
import * as http from 'node:http';

import Provider from 'oidc-provider';

const server = http.createServer();
server.listen(0, '127.0.0.1', () => {
  const issuer = `http://127.0.0.1:${server.address().port}`;
  const provider = new Provider(issuer, {
    scopes: ['openid', 'offline_access', 'mcp'],
    findAccount: async (_ctx, id) => ({ accountId: id, claims: async () => ({ sub: id }) }),
    interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
    features: {
      devInteractions: { enabled: false },
      registration: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: (_ctx, _client, oneOf) => (oneOf ? oneOf[0] : undefined),
        useGrantedResource: () => true,
        getResourceServerInfo: async (_ctx, resource) => {
          if (!/^https?:\/\//.test(resource)) {
            throw new Provider.errors.InvalidTarget();
          }
          return { scope: 'mcp', audience: resource, accessTokenTTL: 3600, accessTokenFormat: 'jwt', jwt: { sign: { alg: 'RS256' } } };
        },
      },
    },
  });
  const callback = provider.callback();
  server.on('request', async (req, res) => {
    if (!req.url.startsWith('/interaction/')) {
      callback(req, res);
      return;
    }
    try {
      const details = await provider.interactionDetails(req, res);
      if (details.prompt.name === 'login') {
        const hint = details.params.login_hint;
        if (!hint) {
          res.writeHead(400).end('login_hint required');
          return;
        }
        await provider.interactionFinished(req, res, { login: { accountId: hint } }, { mergeWithLastSubmission: false });
        return;
      }
      const grant = details.grantId
        ? await provider.Grant.find(details.grantId)
        : new provider.Grant({ accountId: details.session.accountId, clientId: details.params.client_id });
      const missing = details.prompt.details;
      if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
      if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
      for (const [resource, scopes] of Object.entries(missing.missingResourceScopes || {})) {
        grant.addResourceScope(resource, scopes.join(' '));
      }
      const grantId = await grant.save();
      await provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
    } catch (err) {
      console.error(err);
      res.writeHead(500).end(String(err));
    }
  });
  console.log(JSON.stringify({ issuer }));
});
