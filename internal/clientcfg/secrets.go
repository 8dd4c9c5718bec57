package clientcfg

import (
	"net/url"
	"regexp"
	"strings"
)

// secretName matches env and header names that hold credentials by
// convention (GITHUB_PERSONAL_ACCESS_TOKEN, OPENAI_API_KEY, X-Api-Key,
// Authorization, DB_PASSWORD...).
var secretName = regexp.MustCompile(`(?i)(token|secret|passw|pwd|api[_-]?key|apikey|access[_-]?key|private[_-]?key|auth|credential|cookie|session|bearer|signing|(^|[_-])pat$|(^|[_-])key$)`)

// tokenShapes are the prefixes of well-known credentials, matched whatever
// their variable is called.
var tokenShapes = regexp.MustCompile(`^(sk-[A-Za-z0-9_-]{16,}|sk_(live|test)_[A-Za-z0-9]{10,}|rk_(live|test)_[A-Za-z0-9]{10,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_-]{16,}|xox[abprs]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{30,}|ntn_[A-Za-z0-9]{20,}|secret_[A-Za-z0-9]{20,}|lin_api_[A-Za-z0-9]{20,}|pk\.[A-Za-z0-9._-]{30,}|eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]*)$`)

// isSecretName reports whether a variable, header or query parameter name
// says it holds a credential.
func isSecretName(name string) bool { return secretName.MatchString(name) }

// looksLikeToken reports whether a value has the shape of a credential
// (a --key=... argument counts by its value).
func looksLikeToken(v string) bool {
	if _, after, ok := strings.Cut(v, "="); ok && strings.HasPrefix(v, "-") {
		v = after
	}
	v = strings.TrimSpace(v)
	if s, tok, ok := strings.Cut(v, " "); ok && isAuthScheme(s) {
		v = tok
	}
	return tokenShapes.MatchString(v)
}

// isSecret decides whether a literal env or header value must not be
// written in clear. Names decide first, because a short password looks
// like any word; the value's shape catches tokens under neutral names.
// Values that are clearly not credentials (paths, URLs, numbers, booleans)
// stay literal even under a suspicious name, e.g. AUTH_CONFIG_PATH=/etc/x.
func isSecret(group, name, v string) bool {
	if looksLikeToken(v) {
		return true
	}
	if group == "headers" && strings.EqualFold(name, "Authorization") {
		return true
	}
	if u, err := url.Parse(v); err == nil && u.User != nil {
		if _, set := u.User.Password(); set {
			return true // postgres://user:password@host/db
		}
	}
	if !isSecretName(name) {
		return false
	}
	return !plainValue(v)
}

// plainValue matches values no one uses as a credential.
func plainValue(v string) bool {
	switch strings.ToLower(v) {
	case "true", "false", "yes", "no", "on", "off", "none", "null":
		return true
	}
	if strings.HasPrefix(v, "/") || strings.HasPrefix(v, "~/") || strings.HasPrefix(v, "./") ||
		strings.Contains(v, "://") || (len(v) > 2 && v[1] == ':' && (v[2] == '\\' || v[2] == '/')) {
		return true
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
