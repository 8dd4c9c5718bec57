package config

import (
	"fmt"
	"strings"

	"github.com/goccy/go-yaml/ast"
)

// listenTLSFields are the keys of settings.listen_tls.
var listenTLSFields = []string{"cert_file", "key_file", "client_ca_file", "client_auth", "min_version"}

// decodeListenTLS reads settings.listen_tls. set is false for null (plain
// HTTP, as if absent).
func (d *decoder) decodeListenTLS(n ast.Node, field string) (t *ListenTLS, set, ok bool) {
	rn, ok := d.resolve(n, field)
	if !ok {
		return nil, false, false
	}
	if isNull(rn) {
		return nil, false, true
	}
	entries, ok := d.mapping(n, field)
	if !ok {
		return nil, false, false
	}
	t = &ListenTLS{}
	for _, e := range entries {
		f := join(field, e.key)
		var v string
		var vok bool
		switch e.key {
		case "cert_file":
			t.CertFile, _, vok = d.str(e.value, f)
		case "key_file":
			t.KeyFile, _, vok = d.str(e.value, f)
		case "client_ca_file":
			t.ClientCAFile, _, vok = d.str(e.value, f)
		case "client_auth":
			if v, _, vok = d.str(e.value, f); vok {
				if msg := oneOf(v, ClientAuthRequest, ClientAuthRequire); msg != "" {
					d.errorf(posOf(e.value), f, "%s", msg)
					vok = false
				}
				t.ClientAuth = v
			}
		case "min_version":
			if v, _, vok = d.str(e.value, f); vok {
				if msg := oneOf(v, TLS12, TLS13); msg != "" {
					d.errorf(posOf(e.value), f, "%s", msg)
					vok = false
				}
				t.MinVersion = v
			}
		default:
			d.errorf(e.pos, f, "unknown field %q%s", e.key, suggest(e.key, listenTLSFields))
			vok = false
		}
		ok = ok && vok
	}
	if !ok {
		return nil, false, false
	}
	fillListenTLS(t)
	return t, true, true
}

// fillListenTLS sets the defaults of the fields left out.
func fillListenTLS(t *ListenTLS) {
	if t.MinVersion == "" {
		t.MinVersion = TLS12
	}
	if t.ClientAuth == "" && t.ClientCAFile != "" {
		t.ClientAuth = ClientAuthRequest
	}
}

// parseListenTLS reads SWITCHBOARD_LISTEN_TLS: comma-separated key=value
// pairs with the keys of the file, e.g.
// "cert_file=/tls/tls.crt,key_file=/tls/tls.key". Paths are not quoted back
// in errors: they are the operator's own.
func parseListenTLS(raw string) (*ListenTLS, string) {
	t := &ListenTLS{}
	for item := range strings.SplitSeq(raw, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		k, v, ok := strings.Cut(item, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok {
			return nil, fmt.Sprintf("entry %q must be key=value (e.g. cert_file=/tls/tls.crt,key_file=/tls/tls.key)", k)
		}
		switch k {
		case "cert_file":
			t.CertFile = v
		case "key_file":
			t.KeyFile = v
		case "client_ca_file":
			t.ClientCAFile = v
		case "client_auth":
			if msg := oneOf(v, ClientAuthRequest, ClientAuthRequire); msg != "" {
				return nil, "client_auth: " + msg
			}
			t.ClientAuth = v
		case "min_version":
			if msg := oneOf(v, TLS12, TLS13); msg != "" {
				return nil, "min_version: " + msg
			}
			t.MinVersion = v
		default:
			return nil, fmt.Sprintf("unknown key %q%s", k, suggest(k, listenTLSFields))
		}
	}
	fillListenTLS(t)
	return t, ""
}

// checkListenTLS checks the combination of listen_tls's fields; nil (plain
// HTTP) is valid.
func checkListenTLS(t *ListenTLS) string {
	if t == nil {
		return ""
	}
	var missing []string
	if t.CertFile == "" {
		missing = append(missing, "cert_file")
	}
	if t.KeyFile == "" {
		missing = append(missing, "key_file")
	}
	if len(missing) > 0 {
		return fmt.Sprintf("needs %s: the PEM certificate chain and its private key", strings.Join(missing, " and "))
	}
	if t.ClientAuth == ClientAuthRequire && t.ClientCAFile == "" {
		return "client_auth: require needs client_ca_file, the CA that signs client certificates"
	}
	if t.ClientAuth != "" && t.ClientCAFile == "" {
		return "client_auth needs client_ca_file, the CA that signs client certificates"
	}
	return ""
}
