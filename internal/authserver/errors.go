package authserver

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strconv"
)

// OAuth error codes (RFC 6749 §5.2, RFC 7591 §3.2.2, RFC 7009 §2.2.1,
// RFC 8707 §2).
const (
	errInvalidRequest          = "invalid_request"
	errInvalidClient           = "invalid_client"
	errInvalidGrant            = "invalid_grant"
	errUnauthorizedClient      = "unauthorized_client"
	errUnsupportedGrantType    = "unsupported_grant_type"
	errUnsupportedResponseType = "unsupported_response_type"
	errUnsupportedTokenType    = "unsupported_token_type"
	errInvalidScope            = "invalid_scope"
	errInvalidTarget           = "invalid_target"
	errAccessDenied            = "access_denied"
	errInvalidRedirectURI      = "invalid_redirect_uri"
	errInvalidClientMetadata   = "invalid_client_metadata"
	errServerError             = "server_error"
	errTemporarilyUnavailable  = "temporarily_unavailable"
)

// Body limits. Real requests are a few hundred bytes; the limits only stop
// a caller from making the server buffer megabytes.
const (
	maxFormBytes         = 16 << 10
	maxRegistrationBytes = 64 << 10
	maxDocumentBytes     = 64 << 10
)

// oauthError is an error answered with the OAuth JSON error body.
type oauthError struct {
	Code        string `json:"error"`
	Description string `json:"error_description,omitempty"`
	status      int
	basic       bool // the client tried HTTP Basic: answer with its challenge
}

func (e *oauthError) Error() string { return e.Code + ": " + e.Description }

func newError(status int, code, format string, args ...any) *oauthError {
	return &oauthError{Code: code, Description: fmt.Sprintf(format, args...), status: status}
}

func badRequest(code, format string, args ...any) *oauthError {
	return newError(http.StatusBadRequest, code, format, args...)
}

// unavailable is the answer to a failure of the store or of a key: not the
// caller's fault, worth a retry.
func unavailable() *oauthError {
	return newError(http.StatusServiceUnavailable, errTemporarilyUnavailable, "the authorization server cannot answer now; try again")
}

// noStore sets the headers every response carrying credentials (or an
// error about them) must have (RFC 6749 §5.1).
func noStore(w http.ResponseWriter) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Pragma", "no-cache")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client went away: nothing to do
}

func writeError(w http.ResponseWriter, e *oauthError) {
	noStore(w)
	if e.status == http.StatusUnauthorized && e.basic {
		w.Header().Set("WWW-Authenticate", `Basic realm="switchboard"`)
	}
	writeJSON(w, e.status, e)
}

// readForm parses a POSTed form body of at most maxFormBytes. Parameters
// in the query are ignored (credentials belong in the body), and a
// parameter sent twice is refused (RFC 6749 §3.1).
func readForm(w http.ResponseWriter, r *http.Request) (url.Values, *oauthError) {
	if r.Method != http.MethodPost {
		return nil, newError(http.StatusMethodNotAllowed, errInvalidRequest, "use POST")
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/x-www-form-urlencoded" {
		return nil, badRequest(errInvalidRequest, "the body must be application/x-www-form-urlencoded")
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, badRequest(errInvalidRequest, "request body larger than %d bytes", maxFormBytes)
		}
		return nil, badRequest(errInvalidRequest, "malformed form body")
	}
	for k, v := range r.PostForm {
		if len(v) > 1 {
			return nil, badRequest(errInvalidRequest, "parameter %s is repeated", k)
		}
	}
	return r.PostForm, nil
}

// allowCORS lets browser-based clients call an endpoint from their own
// origin. No credentials are involved (no cookies): the request carries
// its own.
func allowCORS(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Access-Control-Allow-Origin", "*")
		if r.Method == http.MethodOptions {
			w.Header().Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
			w.Header().Set("Access-Control-Allow-Headers", "Authorization, Content-Type, MCP-Protocol-Version")
			w.Header().Set("Access-Control-Max-Age", strconv.Itoa(86400))
			w.WriteHeader(http.StatusNoContent)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// random returns n random bytes as base64url: codes, tokens, IDs.
func random(n int) string {
	b := make([]byte, n)
	rand.Read(b) // never fails (crypto/rand, Go ≥ 1.24)
	return base64.RawURLEncoding.EncodeToString(b)
}

// hash is how codes, refresh tokens, client secrets, cookies and states
// are stored: hex SHA-256. They carry 256 random bits; nothing to stretch.
func hash(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// Prefixes of the secrets the server hands out, so that secret scanners
// and humans recognise them.
const (
	prefixCode    = "sbcode_"
	prefixRefresh = "sbrt_"
	prefixSecret  = "sbcs_"
	prefixClient  = "sbclient_"
)
