package identity

import (
	"crypto/x509"
	"strings"

	"github.com/switchboard-mcp/switchboard/internal/authz"
)

// CertIdentity is the caller a verified client certificate authenticates:
// ID "mtls:<subject CN>", agent id the CN. It carries no roles and no
// workspace policy, so grants to the agent decide what it may do, as for
// an API key without one. The leaf must already be verified (the TLS
// listener does that against its client CA); this only names it.
func CertIdentity(leaf *x509.Certificate) (authz.Identity, error) {
	cn := strings.TrimSpace(leaf.Subject.CommonName)
	if cn == "" {
		return authz.Identity{}, authErr(CodeInvalid, "the client certificate has no subject common name to name the agent")
	}
	return authz.Identity{ID: "mtls:" + cn, AgentID: cn, Roles: []string{}, Method: "mtls"}, nil
}
