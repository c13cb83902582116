// Package auth authenticates callers of the intake HTTP API and producers on
// erasure.intake, authorises them per tenant, and rate-limits requests per tenant.
//
// A caller presents "Authorization: Bearer <credential>". The credential is either an
// opaque token minted by NewToken ("lt_…") and configured only by its SHA-256 hash, or a
// JWT (three dot-separated segments) signed with HS256, RS256 or ES256 (see JWTConfig for
// what a JWT must carry and where its keys come from). Either way the
// result is a Principal: a name and the tenants it may act for ("*" for an operator).
// Authentication failures are ErrUnauthenticated (HTTP 401); a principal acting for a
// tenant it may not is the caller's to refuse with Principal.May or Principal.Authorize
// (ErrForbidden, HTTP 403).
//
// Producers on erasure.intake authenticate the same way: every record carries the header
// RecordHeader ("authorization") with the value "Bearer <credential>". The consumer passes
// that value to AuthenticateHeader and the record's tenant to Principal.Authorize; a
// record without a valid credential, or for a tenant its principal may not act for, is
// rejected and dead-lettered with the error's reason (which never holds the credential).
// The event's own fields (such as a source name) are never trusted as identity: whoever
// can write to the topic could set them.
//
// Configuration comes from the declared Settings (see Settings.Authenticator) or a Config
// (see New). Nothing here logs, prints or returns a credential: the Authenticator holds
// only token hashes and public keys, and its printed form masks the HMAC secret.
package auth

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// ErrUnauthenticated means the credential is missing, malformed, unknown, expired or
// badly signed. HTTP callers answer 401.
var ErrUnauthenticated = errors.New("unauthenticated")

// ErrForbidden means an authenticated principal may not act for the tenant. HTTP callers
// answer 403.
var ErrForbidden = errors.New("forbidden")

// Wildcard in Principal.Tenants grants every tenant (an operator).
const Wildcard = "*"

// RecordHeader is the Kafka record header on erasure.intake that carries a producer's
// credential as "Bearer <credential>".
const RecordHeader = "authorization"

// MaxCredentialBytes bounds a presented credential; longer ones are rejected unparsed.
const MaxCredentialBytes = 8 << 10

// Principal is an authenticated caller: its name (for logs and audit) and the tenants it
// may act for. Tenants holding Wildcard grants every tenant.
type Principal struct {
	Name    string
	Tenants []string // "*" = any
	Roles   []string // e.g. RoleApprover; none by default
}

// RoleApprover may approve or reject the requests that need a second person (a TENANT
// scope offboarding) in its tenants, never its own.
const RoleApprover = "approver"

// RoleHolds may place and release legal holds in its tenants.
const RoleHolds = "holds"

// RoleLift may lift the suppression of identifiers in its tenants.
const RoleLift = "lift"

// Has reports whether p holds role.
func (p Principal) Has(role string) bool { return slices.Contains(p.Roles, role) }

// May reports whether p may act for tenant. Tenants match exactly (no prefix or pattern
// matching); Wildcard matches every non-empty tenant; the empty tenant never matches.
func (p Principal) May(tenant string) bool {
	if tenant == "" {
		return false
	}
	for _, t := range p.Tenants {
		if t == Wildcard || t == tenant {
			return true
		}
	}
	return false
}

// Authorize returns nil when p may act for tenant and an error wrapping ErrForbidden
// otherwise. The error names the principal, not the tenant.
func (p Principal) Authorize(tenant string) error {
	if p.May(tenant) {
		return nil
	}
	return fmt.Errorf("%w: principal %q may not act for this tenant", ErrForbidden, p.Name)
}

// Anonymous is the principal of every request when authentication is disabled.
var Anonymous = Principal{Name: "anonymous", Tenants: []string{Wildcard}}

// Config configures an Authenticator. At least one of Tokens and JWT must be set unless
// Disabled is true.
type Config struct {
	Tokens   []Token   // opaque tokens, by hash
	JWT      JWTConfig // JWT verification; zero value = JWTs are not accepted
	Disabled bool      // every request is Anonymous; mutually exclusive with credentials
	Logger   *zap.Logger
	Now      func() time.Time // clock for JWT exp/nbf; default time.Now
}

// String describes c without secrets.
func (c Config) String() string {
	return fmt.Sprintf("auth.Config{tokens: %d, jwt: %s, disabled: %t}", len(c.Tokens), c.JWT, c.Disabled)
}

// GoString is String, so %#v prints no secret either.
func (c Config) GoString() string { return c.String() }

// Authenticator verifies bearer credentials. Its configuration is immutable after New and
// it is safe for concurrent use; a JWT key set read from a file or URL is refreshed in the
// background until Close.
type Authenticator struct {
	tokens   []tokenEntry
	jwt      *jwtVerifier
	disabled bool
	log      *zap.Logger
}

// New builds an Authenticator from cfg. It fails if nothing is configured and Disabled is
// false, or if Disabled is true and credentials are configured too (an ambiguous setup).
// When disabled it logs a warning once, here.
func New(cfg Config) (*Authenticator, error) {
	log := cfg.Logger
	if log == nil {
		log = stderrLogger()
	}
	a := &Authenticator{log: log, disabled: cfg.Disabled}
	entries, err := compileTokens(cfg.Tokens)
	if err != nil {
		return nil, err
	}
	a.tokens = entries
	if cfg.JWT.enabled() {
		if a.jwt, err = newJWTVerifier(cfg.JWT, cfg.Now, log); err != nil {
			return nil, err
		}
	} else if cfg.JWT.Issuer != "" || cfg.JWT.Audience != "" {
		return nil, errors.New("auth: jwt issuer or audience configured without a key (JWKS file, JWKS URL or HS256 secret)")
	}
	configured := len(a.tokens) > 0 || a.jwt != nil
	switch {
	case cfg.Disabled && configured:
		a.Close()
		return nil, errors.New("auth: authentication is disabled but credentials are configured; remove one of them")
	case cfg.Disabled:
		log.Warn("authentication disabled: every caller acts as an operator for every tenant; never run this way in production")
	case !configured:
		a.Close()
		return nil, errors.New("auth: no credentials configured (set LETHE_TOKENS_FILE, LETHE_TOKENS, LETHE_JWKS_FILE, LETHE_JWKS_URL or LETHE_JWT_HS256_SECRET, or LETHE_AUTH_DISABLED=true)")
	}
	return a, nil
}

// Close stops the background refresh of a JWT key set file or URL; JWTs naming keys of
// that set may fail afterwards. It is safe to call more than once and returns nil.
func (a *Authenticator) Close() error {
	if a.jwt != nil {
		a.jwt.stop()
	}
	return nil
}

// Disabled reports whether every request is authenticated as Anonymous.
func (a *Authenticator) Disabled() bool { return a.disabled }

// AuthenticateHeader authenticates the value of an Authorization header (or of an
// erasure.intake record's RecordHeader): "Bearer <credential>". Errors wrap
// ErrUnauthenticated and never contain the credential.
func (a *Authenticator) AuthenticateHeader(value string) (Principal, error) {
	if a.disabled {
		return anonymous(), nil
	}
	tok, err := ParseBearer(value)
	if err != nil {
		return Principal{}, err
	}
	return a.AuthenticateToken(tok)
}

// AuthenticateToken authenticates a bare credential: a JWT when it has three
// dot-separated segments, an opaque token otherwise. Errors wrap ErrUnauthenticated and
// never contain the credential. The returned Principal's Tenants is the caller's to keep.
func (a *Authenticator) AuthenticateToken(token string) (Principal, error) {
	if a.disabled {
		return anonymous(), nil
	}
	switch {
	case token == "":
		return Principal{}, fmt.Errorf("%w: missing bearer token", ErrUnauthenticated)
	case len(token) > MaxCredentialBytes:
		return Principal{}, fmt.Errorf("%w: credential too long", ErrUnauthenticated)
	case strings.Count(token, ".") == 2:
		if a.jwt == nil {
			return Principal{}, fmt.Errorf("%w: jwt credentials are not accepted", ErrUnauthenticated)
		}
		return a.jwt.verify(token)
	}
	return a.lookup(token)
}

// String describes a without secrets: principal names, counts, issuer and audience; a nil
// Authenticator is "auth: none".
func (a *Authenticator) String() string {
	if a == nil {
		return "auth: none"
	}
	if a.disabled {
		return "auth: DISABLED (every caller is an operator for every tenant)"
	}
	names := make([]string, len(a.tokens))
	for i, e := range a.tokens {
		names[i] = e.principal.Name
	}
	s := fmt.Sprintf("auth: %d tokens %v", len(a.tokens), names)
	if a.jwt != nil {
		s += ", jwt " + a.jwt.String()
	}
	return s
}

// GoString is String, so %#v prints no secret either.
func (a *Authenticator) GoString() string { return a.String() }

func anonymous() Principal {
	return Principal{Name: Anonymous.Name, Tenants: slices.Clone(Anonymous.Tenants)}
}

// stderrLogger is the default logger: warnings and above to stderr, so that a disabled
// authenticator is loud even when the caller passed no logger.
func stderrLogger() *zap.Logger {
	ec := zap.NewProductionEncoderConfig()
	ec.EncodeTime = zapcore.ISO8601TimeEncoder
	enc := zapcore.NewJSONEncoder(ec)
	return zap.New(zapcore.NewCore(enc, zapcore.Lock(os.Stderr), zapcore.WarnLevel)).Named("auth")
}
