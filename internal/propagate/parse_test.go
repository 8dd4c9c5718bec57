package propagate

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestParseTokenResponse(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		bearer bool
		tok    string
		life   time.Duration
		err    string
	}{
		{"ok", 200, `{"access_token":"abc.def","token_type":"Bearer","expires_in":300}`, true, "abc.def", 5 * time.Minute, ""},
		{"no expiry", 200, `{"access_token":"abc","token_type":"bearer"}`, true, "abc", time.Minute, ""},
		{"negative expiry", 200, `{"access_token":"abc","expires_in":-5}`, true, "abc", time.Minute, ""},
		{"huge expiry is bounded", 200, `{"access_token":"abc","expires_in":9223372036854775807}`, true, "abc", maxTokenLife, ""},
		{"refused", 400, `{"error":"invalid_grant","error_description":"subject not allowed"}`, true, "", 0, "refused (HTTP 400): invalid_grant: subject not allowed"},
		{"refused without JSON", 502, `<html>bad gateway</html>`, true, "", 0, "refused (HTTP 502)"},
		{"not JSON", 200, `access_token=abc`, true, "", 0, "not JSON"},
		{"no token", 200, `{"token_type":"Bearer"}`, true, "", 0, "refused (HTTP 200)"},
		{"not bearer", 200, `{"access_token":"abc","token_type":"DPoP"}`, true, "", 0, `token_type "DPoP" is not Bearer`},
		{"other type in its own header", 200, `{"access_token":"abc","token_type":"N_A"}`, false, "abc", time.Minute, ""},
		{"header injection", 200, `{"access_token":"abc\r\nX-Admin: 1"}`, true, "", 0, "not visible ASCII"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok, life, err := parseTokenResponse(tt.status, []byte(tt.body), tt.bearer)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || tok != tt.tok || life != tt.life {
				t.Fatalf("= %q %s %v, want %q %s", tok, life, err, tt.tok, tt.life)
			}
		})
	}
}

// FuzzParseTokenResponse: whatever an authorization server answers, the
// parser returns a token fit for a header with a positive bounded life,
// or an error that does not repeat a token.
func FuzzParseTokenResponse(f *testing.F) {
	f.Add(200, []byte(`{"access_token":"abc","token_type":"Bearer","expires_in":300}`), true)
	f.Add(400, []byte(`{"error":"invalid_grant","error_description":"no"}`), false)
	f.Add(200, []byte(`{"access_token":"a\u0000b"}`), true)
	f.Add(200, []byte(`[]`), true)
	f.Fuzz(func(t *testing.T, status int, body []byte, bearer bool) {
		tok, life, err := parseTokenResponse(status, body, bearer)
		if err != nil {
			var ee *ExchangeError
			if errors.As(err, &ee) && (len(ee.Code) > 210 || len(ee.Description) > 210) {
				t.Fatalf("an unbounded error: %d bytes", len(err.Error()))
			}
			return
		}
		if status != http.StatusOK || tok == "" || life <= 0 || life > maxTokenLife {
			t.Fatalf("accepted status %d token %q life %s", status, tok, life)
		}
		if strings.ContainsFunc(tok, func(r rune) bool { return r <= ' ' || r >= 0x7f }) {
			t.Fatalf("token %q is not fit for a header", tok)
		}
	})
}
