package config

import (
	"fmt"
	"reflect"
	"strings"
)

// listenTLSFields are the keys of settings.listen_tls.
var listenTLSFields = infoOf(reflect.TypeFor[ListenTLS]()).keys

// check rejects unknown values of client_auth and min_version (null counts
// as ""), then fills the defaults.
func (t *ListenTLS) check(s scope) bool {
	ok := true
	for _, f := range []struct {
		key, v  string
		allowed []string
	}{{"client_auth", t.ClientAuth, []string{ClientAuthRequest, ClientAuthRequire}}, {"min_version", t.MinVersion, []string{TLS12, TLS13}}} {
		if k := s.in(f.key); k.has() && !k.broken() {
			if msg := oneOf(f.v, f.allowed...); msg != "" {
				k.atVal("%s", msg)
				ok = false
			}
		}
	}
	fillListenTLS(t)
	return ok
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
