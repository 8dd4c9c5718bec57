package identity

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/switchboard-mcp/switchboard/internal/authz"
)

// Algorithms accepted per key source. Pinning them (jwt.WithValidMethods)
// is what stops alg=none and HS256-signed-with-the-public-key attacks.
var (
	hmacMethods = []string{"HS256", "HS384", "HS512"}
	jwksMethods = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384"}
)

// jwtVerifier verifies tokens and maps their claims to an identity.
type jwtVerifier struct {
	cfg    JWTConfig
	parser *jwt.Parser
	secret []byte     // HS256; nil when jwks is set
	jwks   *jwksCache // set by New when cfg.JWKSURL is
}

func newJWTVerifier(cfg JWTConfig, clock func() time.Time) *jwtVerifier {
	methods := jwksMethods
	var secret []byte
	if cfg.Secret != "" {
		methods, secret = hmacMethods, []byte(cfg.Secret)
	}
	opts := []jwt.ParserOption{
		jwt.WithValidMethods(methods),
		jwt.WithLeeway(cfg.Leeway),
		jwt.WithTimeFunc(clock),
		jwt.WithExpirationRequired(),
	}
	if cfg.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(cfg.Issuer))
	}
	if cfg.Audience != "" {
		opts = append(opts, jwt.WithAudience(cfg.Audience))
	}
	return &jwtVerifier{cfg: cfg, parser: jwt.NewParser(opts...), secret: secret}
}

func (v *jwtVerifier) verify(ctx context.Context, token string) (authz.Identity, error) {
	claims, err := v.parse(ctx, token)
	if err != nil {
		return authz.Identity{}, err
	}
	return v.identity(claims)
}

// parse verifies the token's signature and registered claims and returns
// its claims.
func (v *jwtVerifier) parse(ctx context.Context, token string) (jwt.MapClaims, error) {
	claims := jwt.MapClaims{}
	_, err := v.parser.ParseWithClaims(token, claims, func(t *jwt.Token) (any, error) {
		if v.secret != nil {
			return v.secret, nil
		}
		kid, ok := t.Header["kid"].(string)
		if !ok && t.Header["kid"] != nil {
			return nil, errors.New("kid is not a string")
		}
		return v.jwks.key(ctx, kid, t.Method.Alg())
	})
	if err != nil {
		return nil, jwtError(ctx, err)
	}
	return claims, nil
}

// jwtError turns a parse error into an *Error with a reason of our own
// words (library messages are not promised to stay token-free), or passes
// through an error that is not the caller's fault.
func jwtError(ctx context.Context, err error) error {
	if errors.Is(err, ErrUnavailable) {
		return fmt.Errorf("verify token: %w", err)
	}
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return fmt.Errorf("verify token: %w", ctx.Err())
	}
	invalid := func(reason string) error { return authErr(CodeInvalid, reason) }
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return authErr(CodeExpired, "token has expired")
	case errors.Is(err, jwt.ErrTokenMalformed):
		return invalid("malformed token")
	case errors.Is(err, errUnknownKid):
		return invalid("token signing key id is unknown")
	case errors.Is(err, errAmbiguousKey):
		return invalid("token has no kid and the key set has several keys")
	case errors.Is(err, errAlgMismatch):
		return invalid("token algorithm does not match its signing key")
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return invalid("token signature or algorithm is invalid")
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return invalid("token is not valid yet")
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return invalid("token has the wrong issuer")
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return invalid("token has the wrong audience")
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		// The library's message names the claim from a fixed list.
		for _, c := range []string{"exp", "iss", "aud", "nbf", "iat", "sub"} {
			if strings.Contains(err.Error(), c+" claim is required") {
				return invalid("token has no " + c + " claim")
			}
		}
		return invalid("token is missing a required claim")
	case errors.Is(err, jwt.ErrInvalidType):
		return invalid("token has a registered claim of the wrong type")
	default:
		return invalid("token is invalid")
	}
}

// identity maps verified claims to an Identity.
func (v *jwtVerifier) identity(c jwt.MapClaims) (authz.Identity, error) {
	agent, err := stringClaim(c, v.cfg.AgentClaim)
	if err != nil {
		return authz.Identity{}, err
	}
	if agent == "" {
		return authz.Identity{}, authErr(CodeInvalid, "token has no "+v.cfg.AgentClaim+" claim")
	}
	iss, err := stringClaim(c, "iss")
	if err != nil {
		return authz.Identity{}, err
	}
	sub, err := stringClaim(c, "sub")
	if err != nil {
		return authz.Identity{}, err
	}
	if sub == "" {
		sub = agent
	}
	id := authz.Identity{ID: "jwt:" + iss + "|" + sub, AgentID: agent, Method: "jwt"}
	if id.Roles, err = listClaim(c, v.cfg.RolesClaim); err != nil {
		return authz.Identity{}, err
	}
	if id.Workspace, err = stringClaim(c, v.cfg.WorkspaceClaim); err != nil {
		return authz.Identity{}, err
	}
	if id.AllowServers, err = listClaim(c, v.cfg.AllowClaim); err != nil {
		return authz.Identity{}, err
	}
	if id.DenyServers, err = listClaim(c, v.cfg.DenyClaim); err != nil {
		return authz.Identity{}, err
	}
	if id.Admin, err = boolClaim(c, v.cfg.AdminClaim); err != nil {
		return authz.Identity{}, err
	}
	// Seed 003's backend puts the workspace's effective access in the token:
	// a token that carries any of its claims (even empty, or isAdmin false)
	// is authorized by that policy, with no grant needed.
	for _, name := range []string{v.cfg.AllowClaim, v.cfg.DenyClaim, v.cfg.AdminClaim} {
		if _, ok := c[name]; ok {
			id.WorkspacePolicy = true
		}
	}
	return id, nil
}

func wrongType(name, want string) error {
	return authErr(CodeInvalid, "token claim "+name+" must be "+want)
}

// stringClaim returns a string claim, "" when absent.
func stringClaim(c jwt.MapClaims, name string) (string, error) {
	switch v := c[name].(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	default:
		return "", wrongType(name, "a string")
	}
}

// listClaim accepts a JSON array of strings or one string of space- or
// comma-separated items: identity providers emit both (OAuth "scope" style
// and array style).
func listClaim(c jwt.MapClaims, name string) ([]string, error) {
	var out []string
	switch v := c[name].(type) {
	case nil:
		return nil, nil
	case string:
		for f := range strings.FieldsFuncSeq(v, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
			out = append(out, f)
		}
	case []any:
		for _, e := range v {
			s, ok := e.(string)
			if !ok {
				return nil, wrongType(name, "a list of strings or a separated string")
			}
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	default:
		return nil, wrongType(name, "a list of strings or a separated string")
	}
	return out, nil
}

// boolClaim accepts true/false or the strings "true"/"false", since some
// providers can only emit string claims.
func boolClaim(c jwt.MapClaims, name string) (bool, error) {
	switch v := c[name].(type) {
	case nil:
		return false, nil
	case bool:
		return v, nil
	case string:
		switch {
		case strings.EqualFold(v, "true"):
			return true, nil
		case strings.EqualFold(v, "false"), v == "":
			return false, nil
		}
	}
	return false, wrongType(name, "true or false")
}
