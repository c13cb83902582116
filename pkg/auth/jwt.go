package auth

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
	"go.uber.org/zap"
)

// MinHS256SecretBytes is the shortest accepted HS256 secret (the HMAC-SHA-256 output size).
const MinHS256SecretBytes = 32

// DefaultLeeway is the clock skew allowed when checking exp and nbf.
const DefaultLeeway = 30 * time.Second

// DefaultTenantClaim names the JWT claim that lists a principal's tenants.
const DefaultTenantClaim = "tenants"

// RolesClaim names the optional JWT claim that lists a principal's roles (RoleApprover).
const RolesClaim = "roles"

// jwtMethods are the only signing algorithms accepted; "none" is never one of them.
var jwtMethods = []string{"HS256", "RS256", "ES256"}

// JWTConfig configures JWT verification. Tokens signed with HS256 verify only against
// HS256Secret; tokens signed with RS256 or ES256 verify only against an RSA (>= 2048 bits)
// or P-256 key of the key set, of that key type, with a matching kid when the token names
// one, a matching alg when the key names one, and use "sig" or no use. No other algorithm,
// "none" included, is accepted, and no key is ever used with another algorithm, which rules
// out algorithm confusion (an HS256 token MACed with an RSA public key).
//
// The key set is at most one of JWKS (fixed), JWKSFile or JWKSURL. A file or URL is read
// when the verifier is built (it fails if it cannot be read or holds no usable key), again
// every RefreshInterval, and again when a token names a kid the set does not hold, at most
// once per UnknownKIDInterval: keys an identity provider rotates in are picked up without a
// restart, and keys it removes stop verifying at the next refresh. A failed refresh keeps
// the previous keys and is logged. A JWKSURL must be https, except on a loopback host.
//
// A token must carry exp, iss equal to Issuer and aud holding Audience (both required
// whenever JWT is enabled); nbf is checked when present; a typ header, when present, must
// be "JWT" or "at+jwt" (RFC 9068), compared case-insensitively with or without the
// "application/" prefix; a token with a crit header is refused (no extension is
// understood). The principal's name is the sub claim ("jwt" without one); its tenants are
// the TenantClaim claim, a string (one tenant) or an array of strings, where "*" grants
// every tenant: issue such tokens to operators only.
//
// Verification is github.com/golang-jwt/jwt/v5; the refreshing key set is
// github.com/MicahParks/keyfunc/v3. What is added here is the policy: the algorithm
// allow-list, the per-algorithm key type and strength, typ and crit, required claims.
type JWTConfig struct {
	HS256Secret        []byte        // >= MinHS256SecretBytes; nil = HS256 is not accepted
	JWKS               []byte        // a fixed JSON Web Key Set
	JWKSFile           string        // a file holding a JSON Web Key Set, refreshed
	JWKSURL            string        // a URL serving a JSON Web Key Set, refreshed
	Issuer             string        // required iss
	Audience           string        // required member of aud
	TenantClaim        string        // default DefaultTenantClaim
	Leeway             time.Duration // default DefaultLeeway
	RefreshInterval    time.Duration // default DefaultJWKSRefresh
	UnknownKIDInterval time.Duration // default DefaultUnknownKIDInterval
	HTTPClient         *http.Client  // fetches JWKSURL; default one with a JWKSFetchTimeout timeout
}

func (c JWTConfig) enabled() bool {
	return len(c.HS256Secret) > 0 || c.hasKeySet()
}

func (c JWTConfig) hasKeySet() bool {
	return len(c.JWKS) > 0 || c.JWKSFile != "" || c.JWKSURL != ""
}

// String describes c with the secret masked.
func (c JWTConfig) String() string {
	if !c.enabled() {
		return "off"
	}
	secret := "unset"
	if len(c.HS256Secret) > 0 {
		secret = "***"
	}
	return fmt.Sprintf("{hs256_secret: %s, jwks: %s, iss: %q, aud: %q, tenant_claim: %q}",
		secret, c.keySetName(), c.Issuer, c.Audience, c.TenantClaim)
}

// GoString is String, so %#v prints no secret either.
func (c JWTConfig) GoString() string { return c.String() }

type jwtVerifier struct {
	hs       []byte
	keys     jwkset.Storage // nil: RS256 and ES256 are not accepted
	keySet   string         // where keys come from, for String
	iss, aud string
	claim    string
	parser   *jwt.Parser
	ctx      context.Context // ends the key set's refreshes
	stop     context.CancelFunc
}

func newJWTVerifier(c JWTConfig, now func() time.Time, log *zap.Logger) (*jwtVerifier, error) {
	switch {
	case c.Issuer == "":
		return nil, errors.New("auth: JWT authentication is enabled but no issuer is configured: set LETHE_JWT_ISSUER to the iss every token must carry")
	case c.Audience == "":
		return nil, errors.New("auth: JWT authentication is enabled but no audience is configured: set LETHE_JWT_AUDIENCE to the aud every token must carry")
	}
	v := &jwtVerifier{iss: c.Issuer, aud: c.Audience, claim: c.TenantClaim, keySet: c.keySetName()}
	if v.claim == "" {
		v.claim = DefaultTenantClaim
	}
	leeway := c.Leeway
	if leeway <= 0 {
		leeway = DefaultLeeway
	}
	if now == nil {
		now = time.Now
	}
	v.parser = jwt.NewParser(
		jwt.WithValidMethods(jwtMethods),
		jwt.WithIssuer(c.Issuer),
		jwt.WithAudience(c.Audience),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(leeway),
		jwt.WithTimeFunc(now),
		jwt.WithStrictDecoding(),
		jwt.WithJSONNumber(),
	)
	if len(c.HS256Secret) > 0 {
		if len(c.HS256Secret) < MinHS256SecretBytes {
			return nil, fmt.Errorf("auth: jwt hs256 secret must have at least %d bytes, has %d", MinHS256SecretBytes, len(c.HS256Secret))
		}
		v.hs = bytes.Clone(c.HS256Secret)
	}
	v.ctx, v.stop = context.WithCancel(context.Background())
	if c.hasKeySet() {
		keys, err := openKeySet(v.ctx, c, log)
		if err != nil {
			v.stop()
			return nil, err
		}
		v.keys = keys
	}
	return v, nil
}

func (v *jwtVerifier) String() string {
	return fmt.Sprintf("{hs256: %t, jwks: %s, iss: %q, aud: %q, tenant_claim: %q}", v.hs != nil, v.keySet, v.iss, v.aud, v.claim)
}

// reason is a refusal of the key function, reported as it is.
type reason string

func (r reason) Error() string { return string(r) }

func invalid(why string) error {
	return fmt.Errorf("%w: invalid jwt: %s", ErrUnauthenticated, why)
}

// verify checks a compact JWS and returns its principal.
func (v *jwtVerifier) verify(token string) (Principal, error) {
	claims := jwt.MapClaims{}
	tok, err := v.parser.ParseWithClaims(token, claims, v.key)
	if err != nil {
		return Principal{}, invalid(refusal(tok, err))
	}
	return v.principal(claims)
}

// refusal says why the parser refused a token, without echoing any part of it.
func refusal(tok *jwt.Token, err error) string {
	var r reason
	switch {
	case errors.As(err, &r):
		return string(r)
	case errors.Is(err, jwt.ErrTokenMalformed):
		return "malformed: " + strings.TrimPrefix(err.Error(), jwt.ErrTokenMalformed.Error()+": ")
	case errors.Is(err, jwt.ErrTokenUnverifiable): // alg missing or unknown to the library
		return "unsupported signing algorithm"
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		if tok != nil && tok.Method != nil && !slices.Contains(jwtMethods, tok.Method.Alg()) {
			return "unsupported signing algorithm"
		}
		return "bad signature"
	case errors.Is(err, jwt.ErrTokenInvalidClaims):
		// "token is expired", "token has invalid issuer", "… exp claim is required", …
		return strings.TrimPrefix(err.Error(), jwt.ErrTokenInvalidClaims.Error()+": ")
	}
	return "not verifiable"
}

// key is the jwt.Keyfunc: it checks the header and returns the keys the token may be
// verified with, for its algorithm only.
func (v *jwtVerifier) key(t *jwt.Token) (any, error) {
	if _, ok := t.Header["crit"]; ok {
		return nil, reason("critical header extensions are not supported")
	}
	if typ, ok := t.Header["typ"]; ok && !acceptedType(typ) {
		return nil, reason(`typ must be "JWT" or "at+jwt"`)
	}
	alg := t.Method.Alg()
	if alg == "HS256" {
		if v.hs == nil {
			return nil, reason("HS256 is not accepted")
		}
		return v.hs, nil
	}
	noKey := reason("no " + alg + " key matches")
	if v.keys == nil {
		return nil, noKey
	}
	var candidates []jwkset.JWK
	if raw, ok := t.Header["kid"]; ok {
		kid, isString := raw.(string)
		if !isString {
			return nil, reason("kid must be a string")
		}
		// An unknown kid refreshes a file or URL, rate-limited; whether the kid is still
		// unknown after the refresh or the limit held, the answer is the same.
		k, err := v.keys.KeyRead(v.ctx, kid)
		if err != nil {
			return nil, noKey
		}
		candidates = []jwkset.JWK{k}
	} else {
		all, err := v.keys.KeyReadAll(v.ctx)
		if err != nil {
			return nil, reason("key set unavailable")
		}
		candidates = all
	}
	var set jwt.VerificationKeySet
	for _, k := range candidates {
		if pub, ok := usableKey(k, alg); ok {
			set.Keys = append(set.Keys, pub)
		}
	}
	if len(set.Keys) == 0 {
		return nil, noKey
	}
	return set, nil
}

// acceptedType reports whether a typ header names a JWT (RFC 7519) or an access token
// (RFC 9068). Media types compare case-insensitively and may omit "application/".
func acceptedType(typ any) bool {
	s, ok := typ.(string)
	if !ok {
		return false
	}
	s = strings.TrimPrefix(strings.ToLower(s), "application/")
	return s == "jwt" || s == "at+jwt"
}

// principal checks the tenant claim of verified claims and builds the principal.
func (v *jwtVerifier) principal(claims jwt.MapClaims) (Principal, error) {
	tenants, ok := stringOrList(claims[v.claim])
	if !ok {
		return Principal{}, invalid("claim " + v.claim + " must be a string or an array of strings")
	}
	if len(tenants) == 0 || slices.Contains(tenants, "") {
		return Principal{}, invalid("claim " + v.claim + " grants no tenant")
	}
	name, _ := claims["sub"].(string)
	if name == "" {
		name = "jwt"
	}
	// Roles come from the optional "roles" claim (a string or an array of strings).
	roles, _ := stringOrList(claims[RolesClaim])
	return Principal{Name: name, Tenants: tenants, Roles: roles}, nil
}

// stringOrList reads a claim that is a string or an array of strings.
func stringOrList(v any) ([]string, bool) {
	switch x := v.(type) {
	case string:
		return []string{x}, true
	case []any:
		out := make([]string, 0, len(x))
		for _, e := range x {
			s, ok := e.(string)
			if !ok {
				return nil, false
			}
			out = append(out, s)
		}
		return out, true
	}
	return nil, false
}
