package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
)

var (
	testNow   = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	hsSecret  = []byte("0123456789abcdef0123456789abcdef-hs256")
	rsaKey, _ = rsa.GenerateKey(rand.Reader, 2048)
	ecKey, _  = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
)

func enc(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// signJWT builds a compact JWS. key is a []byte (HMAC), *rsa.PrivateKey, *ecdsa.PrivateKey
// or nil (empty signature).
func signJWT(t testing.TB, header, claims map[string]any, key any) string {
	t.Helper()
	input := enc(mustJSON(header)) + "." + enc(mustJSON(claims))
	digest := sha256.Sum256([]byte(input))
	var sig []byte
	switch k := key.(type) {
	case []byte:
		m := hmac.New(sha256.New, k)
		m.Write([]byte(input))
		sig = m.Sum(nil)
	case *rsa.PrivateKey:
		var err error
		if sig, err = rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, digest[:]); err != nil {
			t.Fatal(err)
		}
	case *ecdsa.PrivateKey:
		r, s, err := ecdsa.Sign(rand.Reader, k, digest[:])
		if err != nil {
			t.Fatal(err)
		}
		sig = make([]byte, 64)
		r.FillBytes(sig[:32])
		s.FillBytes(sig[32:])
	}
	return input + "." + enc(sig)
}

func jwks(t testing.TB) []byte {
	t.Helper()
	pub := ecKey.PublicKey
	ecBytes, err := pub.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	return mustJSON(map[string]any{"keys": []map[string]any{
		{"kty": "RSA", "kid": "r1", "alg": "RS256", "use": "sig",
			"n": enc(rsaKey.N.Bytes()), "e": enc(big.NewInt(int64(rsaKey.E)).Bytes())},
		{"kty": "EC", "kid": "e1", "crv": "P-256", "x": enc(ecBytes[1:33]), "y": enc(ecBytes[33:])},
		{"kty": "OKP", "kid": "ed", "crv": "Ed25519", "x": enc(make([]byte, 32))}, // skipped
	}})
}

func jwtAuth(t *testing.T, c JWTConfig) *Authenticator {
	t.Helper()
	a, err := New(Config{JWT: c, Logger: zap.NewNop(), Now: func() time.Time { return testNow }})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func claims(extra map[string]any) map[string]any {
	c := map[string]any{
		"sub": "upstream-app", "iss": "https://idp.example", "aud": "lethe",
		"exp": testNow.Add(time.Hour).Unix(), "nbf": testNow.Add(-time.Minute).Unix(),
		"tenants": []string{"acme", "globex"},
	}
	for k, v := range extra {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return c
}

func TestJWTValid(t *testing.T) {
	a := jwtAuth(t, JWTConfig{HS256Secret: hsSecret, JWKS: jwks(t), Issuer: "https://idp.example", Audience: "lethe"})
	cases := []struct {
		name   string
		header map[string]any
		claims map[string]any
		key    any
		want   []string
	}{
		{"HS256", map[string]any{"alg": "HS256", "typ": "JWT"}, claims(nil), hsSecret, []string{"acme", "globex"}},
		{"typ at+jwt", map[string]any{"alg": "HS256", "typ": "at+jwt"}, claims(nil), hsSecret, []string{"acme", "globex"}},
		{"typ in another case", map[string]any{"alg": "HS256", "typ": "AT+JWT"}, claims(nil), hsSecret, []string{"acme", "globex"}},
		{"typ as a media type", map[string]any{"alg": "HS256", "typ": "application/at+jwt"}, claims(nil), hsSecret, []string{"acme", "globex"}},
		{"typ jwt", map[string]any{"alg": "ES256", "typ": "jwt"}, claims(nil), ecKey, []string{"acme", "globex"}},
		{"RS256 with kid", map[string]any{"alg": "RS256", "kid": "r1"}, claims(nil), rsaKey, []string{"acme", "globex"}},
		{"RS256 without kid", map[string]any{"alg": "RS256"}, claims(nil), rsaKey, []string{"acme", "globex"}},
		{"ES256", map[string]any{"alg": "ES256", "kid": "e1"}, claims(nil), ecKey, []string{"acme", "globex"}},
		{"tenant string", map[string]any{"alg": "HS256"}, claims(map[string]any{"tenants": "acme"}), hsSecret, []string{"acme"}},
		{"aud array", map[string]any{"alg": "HS256"}, claims(map[string]any{"aud": []string{"other", "lethe"}}), hsSecret, []string{"acme", "globex"}},
		{"no nbf", map[string]any{"alg": "HS256"}, claims(map[string]any{"nbf": nil}), hsSecret, []string{"acme", "globex"}},
		{"expired within leeway", map[string]any{"alg": "HS256"}, claims(map[string]any{"exp": testNow.Add(-10 * time.Second).Unix()}), hsSecret, []string{"acme", "globex"}},
		{"fractional exp", map[string]any{"alg": "HS256"}, claims(map[string]any{"exp": float64(testNow.Unix()) + 0.5}), hsSecret, []string{"acme", "globex"}},
	}
	for _, tc := range cases {
		p, err := a.AuthenticateHeader("Bearer " + signJWT(t, tc.header, tc.claims, tc.key))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if p.Name != "upstream-app" || !slices.Equal(p.Tenants, tc.want) {
			t.Errorf("%s: principal %+v, want tenants %v", tc.name, p, tc.want)
		}
		if p.May("initech") {
			t.Errorf("%s: principal may act for a tenant it was not granted", tc.name)
		}
	}
}

func TestJWTCustomTenantClaimAndWildcard(t *testing.T) {
	a := jwtAuth(t, JWTConfig{HS256Secret: hsSecret, Issuer: "https://idp.example", Audience: "lethe", TenantClaim: "lethe/tenants"})
	tok := signJWT(t, map[string]any{"alg": "HS256"}, claims(map[string]any{"lethe/tenants": []string{"*"}, "sub": nil}), hsSecret)
	p, err := a.AuthenticateToken(tok)
	if err != nil || p.Name != "jwt" || !p.May("anyone") {
		t.Fatalf("operator jwt: %+v %v", p, err)
	}
}

func TestJWTRejected(t *testing.T) {
	a := jwtAuth(t, JWTConfig{HS256Secret: hsSecret, JWKS: jwks(t), Issuer: "https://idp.example", Audience: "lethe"})
	hs := map[string]any{"alg": "HS256"}
	otherRSA, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	valid := signJWT(t, hs, claims(nil), hsSecret)
	parts := strings.Split(valid, ".")
	tampered := parts[0] + "." + enc(mustJSON(claims(map[string]any{"tenants": "*"}))) + "." + parts[2]

	cases := []struct {
		name, token, want string
	}{
		{"expired", signJWT(t, hs, claims(map[string]any{"exp": testNow.Add(-time.Minute).Unix()}), hsSecret), "expired"},
		{"no exp", signJWT(t, hs, claims(map[string]any{"exp": nil}), hsSecret), "exp claim is required"},
		{"exp not a number", signJWT(t, hs, claims(map[string]any{"exp": "tomorrow"}), hsSecret), "exp is invalid"},
		{"not yet valid", signJWT(t, hs, claims(map[string]any{"nbf": testNow.Add(time.Minute).Unix()}), hsSecret), "not valid yet"},
		{"wrong issuer", signJWT(t, hs, claims(map[string]any{"iss": "https://evil"}), hsSecret), "invalid issuer"},
		{"no issuer", signJWT(t, hs, claims(map[string]any{"iss": nil}), hsSecret), "iss claim is required"},
		{"empty issuer", signJWT(t, hs, claims(map[string]any{"iss": ""}), hsSecret), "iss claim is required"},
		{"issuer not a string", signJWT(t, hs, claims(map[string]any{"iss": 7}), hsSecret), "iss is invalid"},
		{"wrong audience", signJWT(t, hs, claims(map[string]any{"aud": []string{"other"}}), hsSecret), "invalid audience"},
		{"no audience", signJWT(t, hs, claims(map[string]any{"aud": nil}), hsSecret), "aud claim is required"},
		{"empty audience", signJWT(t, hs, claims(map[string]any{"aud": []string{}}), hsSecret), "aud claim is required"},
		{"audience of numbers", signJWT(t, hs, claims(map[string]any{"aud": []int{1}}), hsSecret), "aud is invalid"},
		{"no iss, aud or exp", signJWT(t, hs, claims(map[string]any{"iss": nil, "aud": nil, "exp": nil}), hsSecret), "exp claim is required"},
		{"typ of another kind", signJWT(t, map[string]any{"alg": "HS256", "typ": "dpop+jwt"}, claims(nil), hsSecret), `typ must be "JWT" or "at+jwt"`},
		{"typ not a string", signJWT(t, map[string]any{"alg": "HS256", "typ": 1}, claims(nil), hsSecret), `typ must be`},
		{"typ JWE", signJWT(t, map[string]any{"alg": "HS256", "typ": "JOSE"}, claims(nil), hsSecret), `typ must be`},
		{"no tenants", signJWT(t, hs, claims(map[string]any{"tenants": nil}), hsSecret), "claim tenants"},
		{"empty tenants", signJWT(t, hs, claims(map[string]any{"tenants": []string{}}), hsSecret), "grants no tenant"},
		{"tenants of numbers", signJWT(t, hs, claims(map[string]any{"tenants": []int{1}}), hsSecret), "array of strings"},
		{"wrong hs secret", signJWT(t, hs, claims(nil), []byte(strings.Repeat("x", 40))), "bad signature"},
		{"tampered claims", tampered, "bad signature"},
		{"alg none", signJWT(t, map[string]any{"alg": "none"}, claims(nil), nil), "unsupported signing algorithm"},
		{"no alg", signJWT(t, map[string]any{"typ": "JWT"}, claims(nil), hsSecret), "unsupported signing algorithm"},
		{"alg none with signature", signJWT(t, map[string]any{"alg": "none"}, claims(nil), hsSecret), "unsupported signing algorithm"},
		{"alg None", signJWT(t, map[string]any{"alg": "None"}, claims(nil), hsSecret), "unsupported signing algorithm"},
		{"alg HS512", signJWT(t, map[string]any{"alg": "HS512"}, claims(nil), hsSecret), "unsupported signing algorithm"},
		{"crit header", signJWT(t, map[string]any{"alg": "HS256", "crit": []string{"exp"}}, claims(nil), hsSecret), "critical"},
		{"RS256 unknown key", signJWT(t, map[string]any{"alg": "RS256"}, claims(nil), otherRSA), "bad signature"},
		{"RS256 unknown kid", signJWT(t, map[string]any{"alg": "RS256", "kid": "nope"}, claims(nil), rsaKey), "no RS256 key matches"},
		{"RS256 with EC kid", signJWT(t, map[string]any{"alg": "RS256", "kid": "e1"}, claims(nil), rsaKey), "no RS256 key matches"},
		{"ES256 signed by RSA", signJWT(t, map[string]any{"alg": "ES256"}, claims(nil), rsaKey), "bad signature"},
		{"RS256 signed with HMAC", signJWT(t, map[string]any{"alg": "RS256"}, claims(nil), hsSecret), "bad signature"},
		{"garbage header", "!!!." + parts[1] + "." + parts[2], "malformed: could not base64 decode header"},
		{"padded signature", valid + "==", "malformed: could not base64 decode signature"},
		{"RS256 kid not a string", signJWT(t, map[string]any{"alg": "RS256", "kid": 1}, claims(nil), rsaKey), "kid must be a string"},
	}
	for _, tc := range cases {
		_, err := a.AuthenticateToken(tc.token)
		if !errors.Is(err, ErrUnauthenticated) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want ErrUnauthenticated mentioning %q", tc.name, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), tc.token) {
			t.Errorf("%s: error echoes the token", tc.name)
		}
	}
}

// Algorithm confusion: a verifier that holds an RSA or EC public key must never accept an
// HS256 token whose MAC key is that public key (in any encoding), whether or not an HS256
// secret is configured too.
func TestJWTAlgorithmConfusion(t *testing.T) {
	der, err := x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	ecDER, err := x509.MarshalPKIXPublicKey(&ecKey.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	keyMaterial := map[string][]byte{
		"rsa der": der, "rsa pem": pemKey, "rsa modulus": rsaKey.N.Bytes(),
		"ec der": ecDER, "jwks": jwks(t),
	}
	for cfgName, cfg := range map[string]JWTConfig{
		"jwks only":      {JWKS: jwks(t)},
		"jwks and hs256": {JWKS: jwks(t), HS256Secret: hsSecret},
	} {
		cfg.Issuer, cfg.Audience = "https://idp.example", "lethe"
		a := jwtAuth(t, cfg)
		for keyName, material := range keyMaterial {
			for _, kid := range []string{"", "r1", "e1"} {
				tok := signJWT(t, map[string]any{"alg": "HS256", "kid": kid}, claims(nil), material)
				if _, err := a.AuthenticateToken(tok); !errors.Is(err, ErrUnauthenticated) {
					t.Errorf("%s: HS256 token MACed with %s (kid %q) accepted", cfgName, keyName, kid)
				}
			}
		}
	}
	// HS256-only verifier: an RS256 token is refused outright, never checked with the secret.
	a := jwtAuth(t, JWTConfig{HS256Secret: hsSecret, Issuer: "https://idp.example", Audience: "lethe"})
	if _, err := a.AuthenticateToken(signJWT(t, map[string]any{"alg": "RS256"}, claims(nil), hsSecret)); err == nil || !strings.Contains(err.Error(), "no RS256 key") {
		t.Fatalf("RS256 token on an HS256-only verifier: %v", err)
	}
}

func TestJWTNotConfigured(t *testing.T) {
	_, hash := NewToken()
	a, err := New(Config{Tokens: []Token{{Name: "ci", SHA256: hash, Tenants: []string{"acme"}}}, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	tok := signJWT(t, map[string]any{"alg": "HS256"}, claims(nil), hsSecret)
	if _, err := a.AuthenticateToken(tok); !errors.Is(err, ErrUnauthenticated) || !strings.Contains(err.Error(), "not accepted") {
		t.Fatalf("jwt without jwt config: %v", err)
	}
}

func TestJWKSRejectsWeakKeys(t *testing.T) {
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	for name, set := range map[string]string{
		"small rsa":  string(mustJSON(map[string]any{"keys": []map[string]any{{"kty": "RSA", "n": enc(small.N.Bytes()), "e": "AQAB"}}})),
		"bad ec":     `{"keys":[{"kty":"EC","crv":"P-256","x":"AAAA","y":"AAAA"}]}`,
		"off curve":  string(mustJSON(map[string]any{"keys": []map[string]any{{"kty": "EC", "crv": "P-256", "x": enc(make([]byte, 32)), "y": enc(make([]byte, 32))}}})),
		"not json":   `keys`,
		"enc only":   string(mustJSON(map[string]any{"keys": []map[string]any{{"kty": "RSA", "use": "enc", "n": enc(rsaKey.N.Bytes()), "e": "AQAB"}}})),
		"p384 only":  `{"keys":[{"kty":"EC","crv":"P-384","x":"AA","y":"AA"}]}`,
		"alg mismat": string(mustJSON(map[string]any{"keys": []map[string]any{{"kty": "RSA", "alg": "RS512", "n": enc(rsaKey.N.Bytes()), "e": "AQAB"}}})),
	} {
		cfg := JWTConfig{JWKS: []byte(set), Issuer: "https://idp.example", Audience: "lethe"}
		if _, err := New(Config{JWT: cfg, Logger: zap.NewNop()}); err == nil || !strings.HasPrefix(err.Error(), "auth: jwks") {
			t.Errorf("%s: err %v, want a jwks error", name, err)
		}
	}
}

func FuzzAuthenticateToken(f *testing.F) {
	for _, s := range []string{
		signJWT(f, map[string]any{"alg": "HS256"}, claims(nil), hsSecret),
		signJWT(f, map[string]any{"alg": "ES256"}, claims(nil), ecKey),
		"a.b.c", "..", "lt_x", "eyJhbGciOiJub25lIn0..",
	} {
		f.Add(s)
	}
	cfg := JWTConfig{HS256Secret: hsSecret, JWKS: jwks(f), Issuer: "https://idp.example", Audience: "lethe"}
	a, err := New(Config{JWT: cfg, Logger: zap.NewNop(), Now: func() time.Time { return testNow }})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		p, err := a.AuthenticateToken(tok)
		if err == nil && len(p.Tenants) == 0 {
			t.Fatal("authenticated a principal without tenants")
		}
		if err != nil && !errors.Is(err, ErrUnauthenticated) {
			t.Fatalf("error not classified: %v", err)
		}
	})
}
