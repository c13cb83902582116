package auth

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// ConfigFromEnv reads an Authenticator's configuration from the environment:
//
//	LETHE_TOKENS_FILE             YAML or JSON list of {name, token_sha256, tenants}
//	LETHE_TOKENS                  "name:sha256hex:tenant1|tenant2;name2:…" (added to the file's)
//	LETHE_JWKS_FILE               file holding the JSON Web Key Set of RS256 / ES256 JWTs
//	LETHE_JWKS_URL                or a URL serving it (https; http only on loopback)
//	LETHE_JWKS_REFRESH            how often the file or URL is read again   10m
//	LETHE_JWT_HS256_SECRET[_FILE] HS256 secret, >= 32 bytes
//	LETHE_JWT_ISSUER              iss every JWT must carry           required with JWT
//	LETHE_JWT_AUDIENCE            aud every JWT must hold            required with JWT
//	LETHE_JWT_TENANT_CLAIM        claim listing a JWT's tenants      tenants
//	LETHE_AUTH_DISABLED           true: every caller is Anonymous   false
//
// JWT authentication is enabled by a key set or an HS256 secret; it then refuses to start
// without LETHE_JWT_ISSUER and LETHE_JWT_AUDIENCE. The key set file or URL is also read
// again when a token names an unknown kid, at most once a minute (see JWTConfig).
// Values are validated by New; parse errors name the variable and never echo a secret.
func ConfigFromEnv() (Config, error) { return configFrom(os.Getenv, os.ReadFile) }

// FromEnv builds an Authenticator from the environment (ConfigFromEnv, then New) with a
// logger that writes warnings to stderr. To log elsewhere, set Config.Logger and call New.
func FromEnv() (*Authenticator, error) {
	cfg, err := ConfigFromEnv()
	if err != nil {
		return nil, err
	}
	return New(cfg)
}

func configFrom(getenv func(string) string, readFile func(string) ([]byte, error)) (Config, error) {
	var cfg Config
	if path := getenv("LETHE_TOKENS_FILE"); path != "" {
		data, err := readFile(path)
		if err != nil {
			return cfg, fmt.Errorf("auth: LETHE_TOKENS_FILE: %w", err)
		}
		toks, err := ParseTokensFile(data)
		if err != nil {
			return cfg, fmt.Errorf("LETHE_TOKENS_FILE: %w", err)
		}
		cfg.Tokens = append(cfg.Tokens, toks...)
	}
	if s := getenv("LETHE_TOKENS"); strings.TrimSpace(s) != "" {
		toks, err := ParseTokensEnv(s)
		if err != nil {
			return cfg, err
		}
		cfg.Tokens = append(cfg.Tokens, toks...)
	}
	cfg.JWT.JWKSFile = getenv("LETHE_JWKS_FILE")
	cfg.JWT.JWKSURL = getenv("LETHE_JWKS_URL")
	if cfg.JWT.JWKSFile != "" && cfg.JWT.JWKSURL != "" {
		return cfg, errors.New("auth: set LETHE_JWKS_FILE or LETHE_JWKS_URL, not both")
	}
	if v := getenv("LETHE_JWKS_REFRESH"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second {
			return cfg, fmt.Errorf("auth: LETHE_JWKS_REFRESH must be a duration of at least 1s, such as 10m")
		}
		cfg.JWT.RefreshInterval = d
	}
	secret, file := getenv("LETHE_JWT_HS256_SECRET"), getenv("LETHE_JWT_HS256_SECRET_FILE")
	switch {
	case secret != "" && file != "":
		return cfg, errors.New("auth: set LETHE_JWT_HS256_SECRET or LETHE_JWT_HS256_SECRET_FILE, not both")
	case secret != "":
		cfg.JWT.HS256Secret = []byte(secret)
	case file != "":
		data, err := readFile(file)
		if err != nil {
			return cfg, fmt.Errorf("auth: LETHE_JWT_HS256_SECRET_FILE: %w", err)
		}
		cfg.JWT.HS256Secret = []byte(strings.TrimRight(string(data), "\r\n"))
	}
	if n := len(cfg.JWT.HS256Secret); n > 0 && n < MinHS256SecretBytes {
		return cfg, fmt.Errorf("auth: LETHE_JWT_HS256_SECRET must have at least %d bytes, has %d", MinHS256SecretBytes, n)
	}
	cfg.JWT.Issuer = getenv("LETHE_JWT_ISSUER")
	cfg.JWT.Audience = getenv("LETHE_JWT_AUDIENCE")
	cfg.JWT.TenantClaim = getenv("LETHE_JWT_TENANT_CLAIM")
	if v := getenv("LETHE_AUTH_DISABLED"); v != "" {
		disabled, err := strconv.ParseBool(v)
		if err != nil {
			return cfg, fmt.Errorf("auth: LETHE_AUTH_DISABLED must be true or false: %w", err)
		}
		cfg.Disabled = disabled
	}
	return cfg, nil
}

// credentialVars are the variables that configure authentication.
var credentialVars = []string{"LETHE_TOKENS", "LETHE_TOKENS_FILE", "LETHE_JWKS_FILE", "LETHE_JWKS_URL",
	"LETHE_JWT_HS256_SECRET", "LETHE_JWT_HS256_SECRET_FILE", "LETHE_AUTH_DISABLED"}

// FromEnvIfSet is FromEnv when any authentication variable is set, and nil otherwise.
func FromEnvIfSet() (*Authenticator, error) {
	for _, v := range credentialVars {
		if os.Getenv(v) != "" {
			return FromEnv()
		}
	}
	return nil, nil
}
