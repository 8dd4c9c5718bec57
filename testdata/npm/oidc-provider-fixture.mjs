// An OpenID provider (oidc-provider, pinned in package.json) for the
// gateway's external-IdP tests (internal/app/oidcprovider_test.go): it
// issues JWT access tokens bound to a resource (RFC 8707) through the
// client_credentials grant, so a test gets real tokens without a browser.
//
//   node oidc-provider-fixture.mjs
//
// It listens on 127.0.0.1 on a free port and prints one JSON line,
// {"issuer": "http://127.0.0.1:PORT"}, once it serves. Its discovery
// document names the rest (jwks_uri, token_endpoint).
//
// Environment:
//   OIDC_FIXTURE_KEY_FILE  the signing key (a private JWK): read if the file
//                          exists, else generated and written there, so that
//                          two providers can sign with the same key and
//                          differ only in their issuer.
//
// Clients (secret = client_id + "-secret", client_secret_basic), each
// allowed scopes "mcp email" and any http(s) resource as audience; the
// seed 003 claims each puts into its access tokens:
//   normal  mcpServerDenyIds: []               (every server, no grant needed)
//   denied  mcpServerDenyIds: ["other"]
//   admin   isAdmin: true, mcpServerDenyIds: ["other"]  (an admin sees all)
//   short   as normal, but its tokens live 1 second
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';

import Provider from 'oidc-provider';

const keyFile = process.env.OIDC_FIXTURE_KEY_FILE;
if (!keyFile) {
  console.error('OIDC_FIXTURE_KEY_FILE is required');
  process.exit(2);
}
let jwk;
if (fs.existsSync(keyFile)) {
  jwk = JSON.parse(fs.readFileSync(keyFile, 'utf8'));
} else {
  const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
  jwk = { ...privateKey.export({ format: 'jwk' }), kid: 'fixture-key', use: 'sig', alg: 'RS256' };
  fs.writeFileSync(keyFile, JSON.stringify(jwk), { mode: 0o600 });
}

const claimsOf = {
  normal: { mcpServerDenyIds: [] },
  denied: { mcpServerDenyIds: ['other'] },
  admin: { isAdmin: true, mcpServerDenyIds: ['other'] },
  short: { mcpServerDenyIds: [] },
};

const server = http.createServer();
server.listen(0, '127.0.0.1', () => {
  const issuer = `http://127.0.0.1:${server.address().port}`;
  const provider = new Provider(issuer, {
    jwks: { keys: [jwk] },
    clients: Object.keys(claimsOf).map((id) => ({
      client_id: id,
      client_secret: `${id}-secret`,
      grant_types: ['client_credentials'],
      response_types: [],
      redirect_uris: [],
      scope: 'mcp email',
    })),
    scopes: ['openid', 'offline_access', 'mcp', 'email'],
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        // Any http(s) URL is a resource server of this provider: the test
        // asks for the gateway's own URLs and for another resource's.
        getResourceServerInfo: async (_ctx, resource, client) => {
          if (!/^https?:\/\//.test(resource)) {
            throw new Provider.errors.InvalidTarget();
          }
          return {
            scope: 'mcp email',
            audience: resource,
            accessTokenTTL: client.clientId === 'short' ? 1 : 3600,
            accessTokenFormat: 'jwt',
            jwt: { sign: { alg: 'RS256' } },
          };
        },
      },
    },
    extraTokenClaims: async (_ctx, token) => claimsOf[token.clientId],
  });
  server.on('request', provider.callback());
  console.log(JSON.stringify({ issuer }));
});
