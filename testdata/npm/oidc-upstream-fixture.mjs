// An OpenID provider (oidc-provider, pinned in package.json) that protects
// an upstream MCP server for the gateway's OAuth client acceptance runs
// (internal/e2e/upstreamoauth): the authorization-code grant with PKCE,
// approved without a person, refresh tokens rotated on every use, opaque
// access tokens bound to the resource (RFC 8707) and checked by the
// resource server through introspection, so that a revocation here is
// seen on the next call.
//
//   node oidc-upstream-fixture.mjs
//
// It listens on 127.0.0.1 on a free port and prints one JSON line,
// {"issuer": "http://127.0.0.1:PORT"}, once it serves.
//
// Environment:
//   OIDC_REDIRECT_URIS   the gateway's callback URLs, comma separated
//   OIDC_CLIENT_SECRET   the secret of client "gateway" (client_secret_basic)
//   OIDC_RS_SECRET       the secret of client "rs", the resource server,
//                        which only introspects
//   OIDC_ACCESS_TTL      access token lifetime in seconds (default 20)
//   OIDC_EXCHANGE_JWKS, OIDC_EXCHANGE_ISSUER, OIDC_EXCHANGE_SECRET
//                        if set, client "exchanger" (this secret) may use
//                        token exchange (RFC 8693): a subject_token signed by
//                        a key of that JWKS, for that issuer, with aud this
//                        provider's token endpoint, is exchanged for an access
//                        token of its sub for the requested resource
//
// The sign-in is automatic: account "alice" is signed in and consents to
// what the gateway asks. Test-only routes:
//   GET  /test/log     every token issued: [{grant_type, at (ms), expires_in}]
//   GET  /test/tokens  every access and refresh token value issued (for the
//                      "no secret in clear" checks)
//   POST /test/revoke  revokes every grant (and its tokens), as an
//                      administrator of the provider would
import * as http from 'node:http';

import { createRemoteJWKSet, jwtVerify } from 'jose';
import Provider from 'oidc-provider';

const redirectURIs = (process.env.OIDC_REDIRECT_URIS || '').split(',').filter(Boolean);
const clientSecret = process.env.OIDC_CLIENT_SECRET;
const rsSecret = process.env.OIDC_RS_SECRET;
if (redirectURIs.length === 0 || !clientSecret || !rsSecret) {
  console.error('OIDC_REDIRECT_URIS, OIDC_CLIENT_SECRET and OIDC_RS_SECRET are required');
  process.exit(2);
}
const accessTTL = Number(process.env.OIDC_ACCESS_TTL || '20');
const exchangeJWKS = process.env.OIDC_EXCHANGE_JWKS;
const exchangeIssuer = process.env.OIDC_EXCHANGE_ISSUER;
const exchangeSecret = process.env.OIDC_EXCHANGE_SECRET;
const tokenExchange = 'urn:ietf:params:oauth:grant-type:token-exchange';

const log = [];       // token issues
const tokens = [];    // token values
const grants = new Set();

const server = http.createServer();
server.listen(0, '127.0.0.1', () => {
  const issuer = `http://127.0.0.1:${server.address().port}`;
  const exchangeClients = exchangeJWKS ? [{
    client_id: 'exchanger',
    client_secret: exchangeSecret,
    grant_types: [tokenExchange],
    response_types: [],
    redirect_uris: [],
  }] : [];
  const resourceServerInfo = async (_ctx, resource) => {
    if (!/^https?:\/\//.test(resource)) {
      throw new Provider.errors.InvalidTarget();
    }
    return { scope: 'mcp', audience: resource, accessTokenTTL: accessTTL, accessTokenFormat: 'opaque' };
  };
  const provider = new Provider(issuer, {
    clients: [
      ...exchangeClients,
      {
        client_id: 'gateway',
        client_secret: clientSecret,
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        redirect_uris: redirectURIs,
        token_endpoint_auth_method: 'client_secret_basic',
      },
      {
        client_id: 'rs',
        client_secret: rsSecret,
        grant_types: [],
        response_types: [],
        redirect_uris: [],
      },
    ],
    scopes: ['openid', 'offline_access', 'mcp'],
    findAccount: async (_ctx, id) => ({ accountId: id, claims: async () => ({ sub: id }) }),
    // A refresh token for every code, and a new one on every refresh: a
    // refresh token used twice revokes the grant (oidc-provider's reuse
    // detection), so two replicas refreshing the same grant would fail.
    issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed('refresh_token'),
    rotateRefreshToken: true,
    pkce: { required: () => true },
    interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
    features: {
      devInteractions: { enabled: false },
      introspection: { enabled: true },
      revocation: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: (_ctx, _client, oneOf) => oneOf,
        useGrantedResource: () => true,
        getResourceServerInfo: resourceServerInfo,
      },
    },
  });
  if (exchangeJWKS) {
    const keys = createRemoteJWKSet(new URL(exchangeJWKS));
    provider.registerGrantType(tokenExchange, async (ctx) => {
      const { params, client } = ctx.oidc;
      if (params.subject_token_type !== 'urn:ietf:params:oauth:token-type:jwt') {
        throw new Provider.errors.InvalidRequest('unsupported subject_token_type');
      }
      let payload;
      try {
        ({ payload } = await jwtVerify(params.subject_token, keys, {
          issuer: exchangeIssuer, audience: `${issuer}/token`, algorithms: ['ES256'], typ: 'switchboard-identity+jwt',
        }));
      } catch (err) {
        throw new Provider.errors.InvalidGrant(`subject_token rejected: ${err.code || err.message}`);
      }
      const info = await resourceServerInfo(ctx, params.resource, client);
      const token = new provider.AccessToken({
        accountId: payload.sub,
        client,
        gty: 'token_exchange',
        scope: 'mcp',
        resourceServer: new provider.ResourceServer(params.resource, info),
      });
      const value = await token.save();
      ctx.body = {
        access_token: value,
        issued_token_type: 'urn:ietf:params:oauth:token-type:access_token',
        token_type: 'Bearer',
        expires_in: token.expiration,
        scope: 'mcp',
      };
    }, ['subject_token', 'subject_token_type', 'requested_token_type', 'resource', 'audience', 'scope']);
  }
  provider.on('grant.success', (ctx) => {
    log.push({ grant_type: ctx.oidc.params.grant_type, at: Date.now(), expires_in: ctx.body?.expires_in });
  });
  provider.on('access_token.saved', (t) => { tokens.push(t.jti); });
  provider.on('refresh_token.saved', (t) => { tokens.push(t.jti); });

  const callback = provider.callback();
  server.on('request', async (req, res) => {
    try {
      const url = new URL(req.url, issuer);
      if (req.method === 'GET' && url.pathname.startsWith('/interaction/')) {
        const details = await provider.interactionDetails(req, res);
        if (details.prompt.name === 'login') {
          await provider.interactionFinished(req, res, { login: { accountId: 'alice' } }, { mergeWithLastSubmission: false });
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
        grants.add(grantId);
        await provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
        return;
      }
      if (url.pathname === '/test/log') {
        res.setHeader('Content-Type', 'application/json');
        res.end(JSON.stringify(log));
        return;
      }
      if (url.pathname === '/test/tokens') {
        res.setHeader('Content-Type', 'application/json');
        res.end(JSON.stringify(tokens));
        return;
      }
      if (req.method === 'POST' && url.pathname === '/test/revoke') {
        for (const id of grants) {
          const g = await provider.Grant.find(id);
          if (g) await g.destroy();
        }
        grants.clear();
        res.setHeader('Content-Type', 'application/json');
        res.end('{"revoked":true}');
        return;
      }
      callback(req, res);
    } catch (err) {
      console.error(err);
      res.statusCode = 500;
      res.end(String(err));
    }
  });
  console.log(JSON.stringify({ issuer }));
});
