// Package openai holds what the gateway's clients of OpenAI-style HTTP
// APIs (embeddings for search, chat completions for the skills classifier)
// share.
package openai

import (
	"fmt"
	"net/url"
	"strings"
)

// Endpoint resolves the URL of an OpenAI-style operation from what
// operators paste: a base URL ("https://api.example.com"), a /v1 base, or
// the operation's full path. op is the operation's path under /v1, e.g.
// "embeddings" or "chat/completions". The result is an absolute http(s) URL;
// errors show the URL redacted (no user info).
func Endpoint(raw, op string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return nil, fmt.Errorf("url: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("url %q: want an http or https URL with a host", u.Redacted())
	}
	p := strings.TrimRight(u.Path, "/")
	switch {
	case strings.HasSuffix(p, "/"+op):
	case strings.HasSuffix(p, "/v1"):
		p += "/" + op
	default:
		p += "/v1/" + op
	}
	u.Path, u.RawPath = p, ""
	return u, nil
}
