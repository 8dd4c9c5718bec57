// Package upstreamoauth holds the end-to-end tests of the gateway's
// identity work towards upstream servers (issue 19) that run a whole
// gateway (package app) against real components: identity propagation
// verified by an upstream that checks the gateway's assertions against its
// published keys, and the OAuth client's acceptance runs against a real
// OpenID provider (oidc-provider, pinned in testdata/npm) protecting the
// demo server: refresh under load on two PostgreSQL replicas, revocation
// at the provider. They are long, so they live apart from package app's
// tests and run in parallel with them.
package upstreamoauth
