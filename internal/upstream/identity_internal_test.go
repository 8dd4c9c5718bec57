package upstream

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/authz"
)

type recordRT struct{ got *http.Request }

func (r *recordRT) RoundTrip(req *http.Request) (*http.Response, error) {
	r.got = req
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: req}, nil
}

// TestIdentityTransport: the caller in the request's context is asserted
// on requests to the server's host only; a header of that name from
// anyone else is removed; a failed assertion sends nothing.
func TestIdentityTransport(t *testing.T) {
	assertErr := errors.New("no key")
	assert := func(_ context.Context, id authz.Identity) (string, string, error) {
		if id.ID == "fail" {
			return "", "", assertErr
		}
		if id.ID == "" {
			return "", "", nil
		}
		return "X-Who", "signed:" + id.ID, nil
	}
	caller := authz.WithIdentity(context.Background(), authz.Identity{ID: "key:a"})
	tests := []struct {
		name   string
		ctx    context.Context
		url    string
		preset string
		want   string
		err    error
	}{
		{name: "caller", ctx: caller, url: "http://up.example/mcp", want: "signed:key:a"},
		{name: "caller, forged header replaced", ctx: caller, url: "http://up.example/mcp", preset: "forged", want: "signed:key:a"},
		{name: "no caller", ctx: context.Background(), url: "http://up.example/mcp"},
		{name: "no caller, forged header removed", ctx: context.Background(), url: "http://up.example/mcp", preset: "forged"},
		{name: "another host", ctx: caller, url: "http://elsewhere.example/x", preset: "kept", want: "kept"},
		{name: "assertion fails", ctx: authz.WithIdentity(context.Background(), authz.Identity{ID: "fail"}), url: "http://up.example/mcp", err: assertErr},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recordRT{}
			tr := &identityTransport{base: rec, host: "up.example", header: "X-Who", assert: assert}
			req, _ := http.NewRequestWithContext(tt.ctx, http.MethodPost, tt.url, nil)
			if tt.preset != "" {
				req.Header.Set("X-Who", tt.preset)
			}
			_, err := tr.RoundTrip(req)
			if !errors.Is(err, tt.err) {
				t.Fatalf("RoundTrip = %v, want %v", err, tt.err)
			}
			if tt.err != nil {
				if rec.got != nil {
					t.Error("a request went out without its assertion")
				}
				return
			}
			if got := rec.got.Header.Get("X-Who"); got != tt.want {
				t.Errorf("X-Who = %q, want %q", got, tt.want)
			}
			if tt.preset != "" && req.Header.Get("X-Who") != tt.preset {
				t.Error("the caller's request was modified")
			}
		})
	}
}
