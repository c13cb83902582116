package auth

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/lethe-erasure/lethe/pkg/envconf"
)

// Settings declare an Authenticator's credentials. JWT authentication is enabled by a key
// set or an HS256 secret; it then refuses to start without LETHE_JWT_ISSUER and
// LETHE_JWT_AUDIENCE. The key set file or URL is also read again when a token names an
// unknown kid, at most once a minute (see JWTConfig). Errors name the variable and never
// echo a secret.
type Settings struct {
	TokensFile      string        `env:"LETHE_TOKENS_FILE" doc:"YAML or JSON list of {name, token_sha256, tenants}: bearer tokens as SHA-256 hashes with their tenants."`
	Tokens          string        `env:"LETHE_TOKENS" secret:"true" doc:"Bearer tokens added to the file's: name:sha256hex:tenant1|tenant2;name2:… (* is every tenant)."`
	JWKSFile        string        `env:"LETHE_JWKS_FILE" doc:"A file holding the JSON Web Key Set of RS256 / ES256 JWTs; read at start (refused if unreadable or without an RSA >= 2048-bit or P-256 signing key), every LETHE_JWKS_REFRESH and when a token names an unknown kid (at most once a minute); a failed refresh keeps the previous keys and is logged."`
	JWKSURL         string        `env:"LETHE_JWKS_URL" doc:"Or a URL serving the key set: https (http only on loopback); read as LETHE_JWKS_FILE is."`
	JWKSRefresh     time.Duration `env:"LETHE_JWKS_REFRESH" default:"10m" min:"1s" doc:"How often the key set file or URL is read again."`
	HS256Secret     string        `env:"LETHE_JWT_HS256_SECRET" secret:"true" doc:"HS256 secret for JWTs, at least 32 bytes."`
	HS256SecretFile string        `env:"LETHE_JWT_HS256_SECRET_FILE" doc:"A file holding the HS256 secret; set it or LETHE_JWT_HS256_SECRET, not both."`
	Issuer          string        `env:"LETHE_JWT_ISSUER" doc:"The iss every JWT must carry; required whenever JWT is enabled (a key set or HS256 secret is set). Tokens must also carry exp; nbf is checked when present (30 s leeway); a typ header, when present, must be JWT or at+jwt (any case)."`
	Audience        string        `env:"LETHE_JWT_AUDIENCE" doc:"The aud every JWT must hold; required whenever JWT is enabled."`
	TenantClaim     string        `env:"LETHE_JWT_TENANT_CLAIM" default:"tenants" doc:"Claim listing a JWT's tenants (a string or an array; * is every tenant)."`
	Disabled        bool          `env:"LETHE_AUTH_DISABLED" doc:"true: run without authentication (refused when credentials are configured); without authentication the intake listens on loopback only and answers loopback Host names only."`
}

// Validate refuses a key set file beside a URL, and an HS256 secret beside its file.
func (s Settings) Validate() error {
	var errs []error
	if s.JWKSFile != "" && s.JWKSURL != "" {
		errs = append(errs, errors.New("auth: set LETHE_JWKS_FILE or LETHE_JWKS_URL, not both"))
	}
	if s.HS256Secret != "" && s.HS256SecretFile != "" {
		errs = append(errs, errors.New("auth: set LETHE_JWT_HS256_SECRET or LETHE_JWT_HS256_SECRET_FILE, not both"))
	}
	return errors.Join(errs...)
}

// Configured reports whether any credential, or LETHE_AUTH_DISABLED=true, is set.
func (s Settings) Configured() bool {
	return s.TokensFile != "" || s.Tokens != "" || s.JWKSFile != "" || s.JWKSURL != "" || s.HS256Secret != "" || s.HS256SecretFile != "" || s.Disabled
}

// Config returns the Authenticator configuration s declares, reading its files.
func (s Settings) Config() (Config, error) { return s.config(os.ReadFile) }

func (s Settings) config(readFile func(string) ([]byte, error)) (Config, error) {
	var cfg Config
	if s.TokensFile != "" {
		data, err := readFile(s.TokensFile)
		if err != nil {
			return cfg, fmt.Errorf("auth: LETHE_TOKENS_FILE: %w", err)
		}
		toks, err := ParseTokensFile(data)
		if err != nil {
			return cfg, fmt.Errorf("LETHE_TOKENS_FILE: %w", err)
		}
		cfg.Tokens = append(cfg.Tokens, toks...)
	}
	if strings.TrimSpace(s.Tokens) != "" {
		toks, err := ParseTokensEnv(s.Tokens)
		if err != nil {
			return cfg, err
		}
		cfg.Tokens = append(cfg.Tokens, toks...)
	}
	cfg.JWT.JWKSFile, cfg.JWT.JWKSURL, cfg.JWT.RefreshInterval = s.JWKSFile, s.JWKSURL, s.JWKSRefresh
	switch {
	case s.HS256Secret != "":
		cfg.JWT.HS256Secret = []byte(s.HS256Secret)
	case s.HS256SecretFile != "":
		data, err := readFile(s.HS256SecretFile)
		if err != nil {
			return cfg, fmt.Errorf("auth: LETHE_JWT_HS256_SECRET_FILE: %w", err)
		}
		cfg.JWT.HS256Secret = []byte(strings.TrimRight(string(data), "\r\n"))
	}
	if n := len(cfg.JWT.HS256Secret); n > 0 && n < MinHS256SecretBytes {
		return cfg, fmt.Errorf("auth: LETHE_JWT_HS256_SECRET must have at least %d bytes, has %d", MinHS256SecretBytes, n)
	}
	cfg.JWT.Issuer, cfg.JWT.Audience, cfg.JWT.TenantClaim = s.Issuer, s.Audience, s.TenantClaim
	cfg.Disabled = s.Disabled
	return cfg, nil
}

// Authenticator builds the Authenticator s declares (Config, then New) with a logger that
// writes warnings to stderr. Without credentials it fails (see New).
func (s Settings) Authenticator() (*Authenticator, error) {
	cfg, err := s.Config()
	if err != nil {
		return nil, err
	}
	return New(cfg)
}

// AuthenticatorIfSet is Authenticator when s is Configured, and nil otherwise.
func (s Settings) AuthenticatorIfSet() (*Authenticator, error) {
	if !s.Configured() {
		return nil, nil
	}
	return s.Authenticator()
}

// configFrom loads the Settings through getenv and returns their Config, reading files
// with readFile.
func configFrom(getenv func(string) string, readFile func(string) ([]byte, error)) (Config, error) {
	var s Settings
	if err := envconf.Load(&s, getenv); err != nil {
		return Config{}, err
	}
	return s.config(readFile)
}
