package auth

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func TestNewTokenAndHash(t *testing.T) {
	tok, hash := NewToken()
	if !strings.HasPrefix(tok, TokenPrefix) {
		t.Fatalf("token lacks prefix %q", TokenPrefix)
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(tok, TokenPrefix))
	if err != nil || len(raw) != 32 {
		t.Fatalf("token body: %d bytes, err %v; want 32 random bytes in base64url", len(raw), err)
	}
	if hash != HashToken(tok) || len(hash) != 64 || strings.ToLower(hash) != hash {
		t.Fatalf("hash %q is not the lower-case hex SHA-256 of the token", hash)
	}
	// Known answer: SHA-256("abc").
	if got := HashToken("abc"); got != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Fatalf("HashToken(abc) = %s", got)
	}
	if tok2, _ := NewToken(); tok2 == tok {
		t.Fatal("two minted tokens are equal")
	}
}

func TestParseTokensFile(t *testing.T) {
	h1, h2 := HashToken("one"), HashToken("two")
	yamlDoc := fmt.Sprintf("- name: ci\n  token_sha256: %s\n  tenants: [acme, globex]\n- name: ops\n  token_sha256: %s\n  tenants: [\"*\"]\n", h1, h2)
	jsonDoc := fmt.Sprintf("[\n\t{\"name\": \"ci\", \"token_sha256\": %q, \"tenants\": [\"acme\", \"globex\"]},\n\t{\"name\": \"ops\", \"token_sha256\": %q, \"tenants\": [\"*\"]}\n]", h1, h2)
	want := []Token{{Name: "ci", SHA256: h1, Tenants: []string{"acme", "globex"}}, {Name: "ops", SHA256: h2, Tenants: []string{"*"}}}
	for name, doc := range map[string]string{"yaml": yamlDoc, "json": jsonDoc} {
		got, err := ParseTokensFile([]byte(doc))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: got %v, want %v", name, got, want)
		}
	}

	bad := []struct{ name, doc, want string }{
		{"empty", "  \n", "empty"},
		{"no entries", "[]", "no tokens"},
		{"yaml unknown field", "- name: ci\n  token_sha: x\n  tenants: [a]\n", "token_sha"},
		{"json unknown field", `[{"name":"ci","tenant":["a"]}]`, "tenant"},
		{"json syntax", `[{"name":`, "json"},
		{"not a list", "name: ci\n", "yaml"},
	}
	for _, tc := range bad {
		_, err := ParseTokensFile([]byte(tc.doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want one mentioning %q", tc.name, err, tc.want)
		}
	}
}

func TestParseTokensEnv(t *testing.T) {
	h1, h2 := HashToken("one"), HashToken("two")
	got, err := ParseTokensEnv(fmt.Sprintf(" ci:%s:acme|globex ; ops:%s:*;", h1, h2))
	if err != nil {
		t.Fatal(err)
	}
	want := []Token{{Name: "ci", SHA256: h1, Tenants: []string{"acme", "globex"}}, {Name: "ops", SHA256: h2, Tenants: []string{"*"}}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for _, tc := range []struct{ in, want string }{
		{";;", "no tokens"},
		{"ci:" + h1, "entry 1: want name:sha256hex:tenant1|tenant2, got 2 fields"},
		{"ci:" + h1 + ":a;ops:x:y:z", "entry 2"},
	} {
		if _, err := ParseTokensEnv(tc.in); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err %v, want one mentioning %q", tc.in, err, tc.want)
		}
	}
}

func TestNewRejectsBadTokens(t *testing.T) {
	plain, _ := NewToken()
	h := HashToken("x")
	cases := []struct {
		name string
		toks []Token
		want string
	}{
		{"plain token pasted", []Token{{Name: "ci", SHA256: plain, Tenants: []string{"a"}}}, "holds a plain token"},
		{"short hash", []Token{{Name: "ci", SHA256: "abcd", Tenants: []string{"a"}}}, "64 hex characters"},
		{"not hex", []Token{{Name: "ci", SHA256: strings.Repeat("zz", 32), Tenants: []string{"a"}}}, "not hexadecimal"},
		{"missing hash", []Token{{Name: "ci", SHA256: "", Tenants: []string{"a"}}}, "missing"},
		{"no name", []Token{{Name: "", SHA256: h, Tenants: []string{"a"}}}, "name"},
		{"bad name", []Token{{Name: "c i", SHA256: h, Tenants: []string{"a"}}}, "only letters"},
		{"duplicate name", []Token{{Name: "ci", SHA256: h, Tenants: []string{"a"}}, {Name: "ci", SHA256: HashToken("y"), Tenants: []string{"a"}}}, "duplicate name"},
		{"duplicate hash", []Token{{Name: "ci", SHA256: h, Tenants: []string{"a"}}, {Name: "cd", SHA256: strings.ToUpper(h), Tenants: []string{"a"}}}, "same token_sha256"},
		{"no tenants", []Token{{Name: "ci", SHA256: h, Tenants: nil}}, "no tenants"},
		{"empty tenant", []Token{{Name: "ci", SHA256: h, Tenants: []string{"a", ""}}}, "empty tenant"},
		{"partial wildcard", []Token{{Name: "ci", SHA256: h, Tenants: []string{"acme*"}}}, "whole entry"},
		{"space in tenant", []Token{{Name: "ci", SHA256: h, Tenants: []string{"ac me"}}}, "whitespace"},
	}
	for _, tc := range cases {
		_, err := New(Config{Tokens: tc.toks})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want one mentioning %q", tc.name, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), plain) {
			t.Errorf("%s: error echoes the plain token", tc.name)
		}
	}
}

func TestAuthenticateToken(t *testing.T) {
	ci, ciHash := NewToken()
	ops, opsHash := NewToken()
	a, err := New(Config{Tokens: []Token{
		{Name: "ci", SHA256: ciHash, Tenants: []string{"acme"}},
		{Name: "ops", SHA256: strings.ToUpper(opsHash), Tenants: []string{Wildcard}}, // hex case does not matter
	}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := a.AuthenticateToken(ci)
	if err != nil || p.Name != "ci" || !slices.Equal(p.Tenants, []string{"acme"}) {
		t.Fatalf("ci token: %+v, %v", p, err)
	}
	if !p.May("acme") || p.May("globex") || p.May("") || p.May("acm") || p.May("*") {
		t.Fatalf("ci may: acme %t globex %t", p.May("acme"), p.May("globex"))
	}
	if err := p.Authorize("globex"); !errors.Is(err, ErrForbidden) || StatusOf(err) != 403 {
		t.Fatalf("Authorize(globex) = %v, want ErrForbidden", err)
	}
	p.Tenants[0] = "globex" // the caller's copy; the configuration must not change
	if p2, _ := a.AuthenticateToken(ci); p2.May("globex") {
		t.Fatal("mutating a returned principal changed the configuration")
	}

	op, err := a.AuthenticateToken(ops)
	if err != nil || !op.May("acme") || !op.May("any-tenant") || op.May("") {
		t.Fatalf("operator: %+v %v", op, err)
	}

	for name, tok := range map[string]string{
		"unknown":    "lt_" + strings.Repeat("A", 43),
		"hash given": ciHash,
		"empty":      "",
		"too long":   strings.Repeat("a", MaxCredentialBytes+1),
		"jwt shaped": "a.b.c",
	} {
		if _, err := a.AuthenticateToken(tok); !errors.Is(err, ErrUnauthenticated) || StatusOf(err) != 401 {
			t.Errorf("%s: err %v, want ErrUnauthenticated", name, err)
		}
	}
}

// The Authenticator holds hashes only: neither a token nor the HS256 secret appears in
// any printed form, even after the token was used.
func TestPrintedFormHasNoSecret(t *testing.T) {
	tok, hash := NewToken()
	secret := strings.Repeat("s3cr3t-", 6)
	cfg := Config{Tokens: []Token{{Name: "ci", SHA256: hash, Tenants: []string{"acme"}}}, JWT: JWTConfig{HS256Secret: []byte(secret), Issuer: "https://idp", Audience: "lethe"}}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.AuthenticateToken(tok); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		fmt.Sprint(a), fmt.Sprintf("%+v", a), fmt.Sprintf("%#v", a), fmt.Sprintf("%v", *a),
		fmt.Sprint(cfg), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%#v", cfg), fmt.Sprintf("%#v", cfg.JWT),
	} {
		if strings.Contains(s, tok) || strings.Contains(s, secret) {
			t.Fatalf("printed form leaks a secret: %s", s)
		}
	}
	if !strings.Contains(a.String(), "ci") {
		t.Fatalf("String() = %q, want the principal names", a)
	}
}

func TestConfigFromEnv(t *testing.T) {
	h1, h2 := HashToken("one"), HashToken("two")
	files := map[string]string{
		"/tokens.yaml": fmt.Sprintf("- {name: ci, token_sha256: %s, tenants: [acme]}\n", h1),
		"/secret":      strings.Repeat("k", 40) + "\n",
	}
	emptySet := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(emptySet, []byte(`{"keys": []}`), 0o600); err != nil {
		t.Fatal(err)
	}
	readFile := func(p string) ([]byte, error) {
		if s, ok := files[p]; ok {
			return []byte(s), nil
		}
		return nil, fs.ErrNotExist
	}
	build := func(env map[string]string) (*Authenticator, error) {
		cfg, err := configFrom(func(k string) string { return env[k] }, readFile)
		if err != nil {
			return nil, err
		}
		cfg.Logger = zap.NewNop()
		return New(cfg)
	}

	a, err := build(map[string]string{
		"LETHE_TOKENS_FILE":           "/tokens.yaml",
		"LETHE_TOKENS":                "ops:" + h2 + ":*",
		"LETHE_JWT_HS256_SECRET_FILE": "/secret",
		"LETHE_JWT_ISSUER":            "https://idp",
		"LETHE_JWT_AUDIENCE":          "lethe",
	})
	if err != nil {
		t.Fatal(err)
	}
	if p, err := a.AuthenticateToken("one"); err != nil || p.Name != "ci" {
		t.Fatalf("file token: %+v %v", p, err)
	}
	if p, err := a.AuthenticateToken("two"); err != nil || p.Name != "ops" {
		t.Fatalf("env token: %+v %v", p, err)
	}
	if a.jwt == nil || string(a.jwt.hs) != strings.Repeat("k", 40) || a.jwt.iss != "https://idp" || a.jwt.aud != "lethe" || a.jwt.claim != "tenants" {
		t.Fatalf("jwt config not applied: %v", a)
	}

	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{}, "no credentials configured"},
		{map[string]string{"LETHE_TOKENS_FILE": "/missing"}, "LETHE_TOKENS_FILE"},
		{map[string]string{"LETHE_TOKENS": "ci"}, "LETHE_TOKENS entry 1"},
		{map[string]string{"LETHE_JWKS_FILE": emptySet, "LETHE_JWT_ISSUER": "https://idp", "LETHE_JWT_AUDIENCE": "lethe"}, "no RS256 or ES256 signing key"},
		{map[string]string{"LETHE_JWKS_FILE": "/missing.json", "LETHE_JWT_ISSUER": "https://idp", "LETHE_JWT_AUDIENCE": "lethe"}, "jwks file"},
		{map[string]string{"LETHE_JWKS_URL": "http://idp.example/jwks", "LETHE_JWT_ISSUER": "https://idp", "LETHE_JWT_AUDIENCE": "lethe"}, "must be https"},
		{map[string]string{"LETHE_JWKS_URL": "/jwks", "LETHE_JWT_ISSUER": "https://idp", "LETHE_JWT_AUDIENCE": "lethe"}, "not an absolute URL"},
		{map[string]string{"LETHE_JWKS_URL": "https://idp.example/jwks", "LETHE_JWKS_FILE": emptySet}, "not both"},
		{map[string]string{"LETHE_JWKS_FILE": emptySet, "LETHE_JWKS_REFRESH": "soon"}, "LETHE_JWKS_REFRESH"},
		{map[string]string{"LETHE_JWT_HS256_SECRET": strings.Repeat("k", 32), "LETHE_JWT_AUDIENCE": "lethe"}, "set LETHE_JWT_ISSUER"},
		{map[string]string{"LETHE_JWT_HS256_SECRET": strings.Repeat("k", 32), "LETHE_JWT_ISSUER": "https://idp"}, "set LETHE_JWT_AUDIENCE"},
		{map[string]string{"LETHE_JWKS_FILE": emptySet, "LETHE_JWT_AUDIENCE": "lethe"}, "set LETHE_JWT_ISSUER"},
		{map[string]string{"LETHE_JWKS_URL": "https://idp.example/jwks", "LETHE_JWT_ISSUER": "https://idp"}, "set LETHE_JWT_AUDIENCE"},
		{map[string]string{"LETHE_JWT_HS256_SECRET": "short"}, "at least 32 bytes"},
		{map[string]string{"LETHE_JWT_HS256_SECRET": strings.Repeat("k", 32), "LETHE_JWT_HS256_SECRET_FILE": "/secret"}, "not both"},
		{map[string]string{"LETHE_JWT_ISSUER": "https://idp", "LETHE_TOKENS": "ci:" + h1 + ":a"}, "without a key"},
		{map[string]string{"LETHE_AUTH_DISABLED": "yes please"}, "LETHE_AUTH_DISABLED"},
		{map[string]string{"LETHE_AUTH_DISABLED": "true", "LETHE_TOKENS": "ci:" + h1 + ":a"}, "disabled but credentials"},
	} {
		_, err := build(tc.env)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err %v, want one mentioning %q", tc.env, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "short") {
			t.Errorf("%v: error echoes the secret", tc.env)
		}
	}
}

func TestDisabled(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	cfg, err := configFrom(func(k string) string {
		return map[string]string{"LETHE_AUTH_DISABLED": "true"}[k]
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Logger = zap.New(core)
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"", "Bearer nonsense", "Basic abc"} {
		p, err := a.AuthenticateHeader(h)
		if err != nil || p.Name != "anonymous" || !p.May("any") {
			t.Fatalf("header %q: %+v %v, want anonymous operator", h, p, err)
		}
	}
	if !a.Disabled() || !strings.Contains(a.String(), "DISABLED") {
		t.Fatalf("String() = %q, want it to say DISABLED", a)
	}
	if logs.Len() != 1 || !strings.Contains(logs.All()[0].Message, "authentication disabled") {
		t.Fatalf("want exactly one warning, got %d: %v", logs.Len(), logs.All())
	}
}
