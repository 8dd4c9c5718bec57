package authserver

import (
	"net/http"
	"slices"
)

// metadata is the authorization server metadata (RFC 8414), with the
// members MCP clients look for: PKCE S256, the issuer in authorization
// responses (RFC 9207), client ID metadata documents.
func (s *Server) metadata() map[string]any {
	m := map[string]any{
		"issuer":                                         s.cfg.Issuer,
		"authorization_endpoint":                         s.url(PathAuthorize),
		"token_endpoint":                                 s.url(PathToken),
		"jwks_uri":                                       s.url(PathJWKS),
		"revocation_endpoint":                            s.url(PathRevoke),
		"scopes_supported":                               slices.Clone(s.cfg.Scopes),
		"response_types_supported":                       []string{"code"},
		"response_modes_supported":                       []string{"query"},
		"grant_types_supported":                          []string{"authorization_code", "refresh_token"},
		"token_endpoint_auth_methods_supported":          []string{authNone, authSecretBasic, authSecretPost},
		"revocation_endpoint_auth_methods_supported":     []string{authNone, authSecretBasic, authSecretPost},
		"code_challenge_methods_supported":               []string{"S256"},
		"authorization_response_iss_parameter_supported": true,
		"client_id_metadata_document_supported":          !s.cfg.DisableMetadataDocuments,
	}
	if s.cfg.Registration.Mode != RegistrationOff {
		m["registration_endpoint"] = s.url(PathRegister)
	}
	return m
}

func (s *Server) serveMetadata(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		writeError(w, newError(http.StatusMethodNotAllowed, errInvalidRequest, "use GET"))
		return
	}
	w.Header().Set("Cache-Control", "public, max-age=300")
	writeJSON(w, http.StatusOK, s.metadata())
}

// serveOpenIDConfig serves the same metadata as an OpenID Provider
// configuration, for clients that look there first. The server issues no
// ID tokens (it is an OAuth authorization server that signs users in
// elsewhere), but the document carries the members OpenID Connect
// Discovery requires so that strict parsers accept it.
func (s *Server) serveOpenIDConfig(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		writeError(w, newError(http.StatusMethodNotAllowed, errInvalidRequest, "use GET"))
		return
	}
	m := s.metadata()
	m["subject_types_supported"] = []string{"public"}
	m["id_token_signing_alg_values_supported"] = []string{signingAlg}
	w.Header().Set("Cache-Control", "public, max-age=300")
	writeJSON(w, http.StatusOK, m)
}
