package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/lethe-erasure/lethe/pkg/envconf"
)

func newECKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// keySet is the JSON of a JWKS holding the public halves of keys, by kid.
func keySet(t *testing.T, keys map[string]*ecdsa.PrivateKey) []byte {
	t.Helper()
	var list []map[string]any
	for kid, k := range keys {
		b, err := k.PublicKey.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		list = append(list, map[string]any{"kty": "EC", "crv": "P-256", "kid": kid, "use": "sig", "x": enc(b[1:33]), "y": enc(b[33:])})
	}
	return mustJSON(map[string]any{"keys": list})
}

// jwksServer serves a JWKS that a test can replace, counting the fetches.
type jwksServer struct {
	*httptest.Server
	mu      sync.Mutex
	body    []byte
	status  int
	fetches atomic.Int32
}

func newJWKSServer(t *testing.T, body []byte) *jwksServer {
	s := &jwksServer{body: body, status: http.StatusOK}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.fetches.Add(1)
		s.mu.Lock()
		defer s.mu.Unlock()
		w.WriteHeader(s.status)
		w.Write(s.body)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) serve(status int, body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status, s.body = status, body
}

func keySetAuth(t *testing.T, c JWTConfig, log *zap.Logger) *Authenticator {
	t.Helper()
	c.Issuer, c.Audience = "https://idp.example", "lethe"
	a, err := New(Config{JWT: c, Logger: log, Now: func() time.Time { return testNow }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

func es256(t *testing.T, kid string, key *ecdsa.PrivateKey) string {
	header := map[string]any{"alg": "ES256"}
	if kid != "" {
		header["kid"] = kid
	}
	return signJWT(t, header, claims(nil), key)
}

// eventually polls cond for up to ten seconds (a scheduled refresh is asynchronous).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10 s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func writeAtomically(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// A key set file rewritten in place is picked up without a restart: a token naming the new
// kid verifies, and the removed key stops verifying.
func TestJWKSFileRotation(t *testing.T) {
	oldKey, newKey := newECKey(t), newECKey(t)
	path := filepath.Join(t.TempDir(), "jwks.json")
	writeAtomically(t, path, keySet(t, map[string]*ecdsa.PrivateKey{"old": oldKey}))
	a := keySetAuth(t, JWTConfig{JWKSFile: path, RefreshInterval: time.Hour, UnknownKIDInterval: time.Millisecond}, zap.NewNop())

	if _, err := a.AuthenticateToken(es256(t, "old", oldKey)); err != nil {
		t.Fatalf("token of the initial key: %v", err)
	}
	if _, err := a.AuthenticateToken(es256(t, "new", newKey)); err == nil || !strings.Contains(err.Error(), "no ES256 key matches") {
		t.Fatalf("token of a key not yet published: %v", err)
	}

	writeAtomically(t, path, keySet(t, map[string]*ecdsa.PrivateKey{"new": newKey}))
	if p, err := a.AuthenticateToken(es256(t, "new", newKey)); err != nil || p.Name != "upstream-app" {
		t.Fatalf("token of the rotated-in key: %+v %v", p, err)
	}
	if _, err := a.AuthenticateToken(es256(t, "old", oldKey)); err == nil || !strings.Contains(err.Error(), "no ES256 key matches") {
		t.Fatalf("token of the rotated-out key: %v", err)
	}
	// Neither a forged kid nor a key of the right kid but another key pair verifies.
	if _, err := a.AuthenticateToken(es256(t, "new", oldKey)); err == nil || !strings.Contains(err.Error(), "bad signature") {
		t.Fatalf("token with the new kid signed by the old key: %v", err)
	}
}

// A key set URL whose keys change: a token naming a new kid makes one refresh and verifies;
// further unknown kids within UnknownKIDInterval fetch nothing and are refused.
func TestJWKSURLUnknownKIDRefreshIsRateLimited(t *testing.T) {
	k1, k2, forged := newECKey(t), newECKey(t), newECKey(t)
	srv := newJWKSServer(t, keySet(t, map[string]*ecdsa.PrivateKey{"k1": k1}))
	a := keySetAuth(t, JWTConfig{JWKSURL: srv.URL + "/jwks.json", RefreshInterval: time.Hour, UnknownKIDInterval: time.Hour}, zap.NewNop())
	if n := srv.fetches.Load(); n != 1 {
		t.Fatalf("%d fetches at start, want 1", n)
	}
	if _, err := a.AuthenticateToken(es256(t, "k1", k1)); err != nil {
		t.Fatalf("token of the initial key: %v", err)
	}
	if n := srv.fetches.Load(); n != 1 {
		t.Fatalf("a known kid fetched the set again (%d fetches)", n)
	}

	srv.serve(http.StatusOK, keySet(t, map[string]*ecdsa.PrivateKey{"k1": k1, "k2": k2}))
	if _, err := a.AuthenticateToken(es256(t, "k2", k2)); err != nil {
		t.Fatalf("token of the rotated-in key: %v", err)
	}
	if n := srv.fetches.Load(); n != 2 {
		t.Fatalf("%d fetches after an unknown kid, want 2", n)
	}

	for i, kid := range []string{"forged-1", "forged-2", "forged-3"} {
		if _, err := a.AuthenticateToken(es256(t, kid, forged)); err == nil || !strings.Contains(err.Error(), "no ES256 key matches") {
			t.Fatalf("forged kid %d: %v", i, err)
		}
	}
	if n := srv.fetches.Load(); n != 2 {
		t.Fatalf("%d fetches after three more unknown kids within the interval, want still 2", n)
	}
	if _, err := a.AuthenticateToken(es256(t, "k1", k1)); err != nil {
		t.Fatalf("known key after the refused kids: %v", err)
	}
}

// The scheduled refresh replaces the key set: a token without a kid signed by the new key
// starts verifying and one signed by the removed key stops. A failed refresh keeps the
// keys and is logged.
func TestJWKSURLScheduledRefresh(t *testing.T) {
	k1, k2 := newECKey(t), newECKey(t)
	srv := newJWKSServer(t, keySet(t, map[string]*ecdsa.PrivateKey{"k1": k1}))
	core, logs := observer.New(zap.WarnLevel)
	a := keySetAuth(t, JWTConfig{JWKSURL: srv.URL, RefreshInterval: 20 * time.Millisecond, UnknownKIDInterval: time.Hour}, zap.New(core))
	if _, err := a.AuthenticateToken(es256(t, "", k1)); err != nil {
		t.Fatalf("token of the initial key: %v", err)
	}
	if _, err := a.AuthenticateToken(es256(t, "", k2)); err == nil {
		t.Fatal("token of an unpublished key verified")
	}

	srv.serve(http.StatusOK, keySet(t, map[string]*ecdsa.PrivateKey{"k2": k2}))
	eventually(t, "new key verifies", func() bool {
		_, err := a.AuthenticateToken(es256(t, "", k2))
		return err == nil
	})
	if _, err := a.AuthenticateToken(es256(t, "", k1)); err == nil {
		t.Fatal("token of the removed key still verifies after the refresh")
	}

	srv.serve(http.StatusInternalServerError, []byte("down"))
	before := srv.fetches.Load()
	eventually(t, "failed refreshes", func() bool { return srv.fetches.Load() >= before+2 })
	if _, err := a.AuthenticateToken(es256(t, "", k2)); err != nil {
		t.Fatalf("a failed refresh dropped the keys: %v", err)
	}
	if logs.FilterMessageSnippet("jwks refresh failed").Len() == 0 {
		t.Fatalf("failed refresh not logged: %v", logs.All())
	}
	for _, e := range logs.All() {
		if strings.Contains(e.ContextMap()["jwks"].(string), "?") {
			t.Errorf("logged URL keeps its query: %v", e.ContextMap())
		}
	}
}

// A key set URL that cannot be read, or holds no usable key, refuses to start.
func TestJWKSURLUnreadableAtStart(t *testing.T) {
	srv := newJWKSServer(t, nil)
	for name, tc := range map[string]struct {
		status int
		body   string
		want   string
	}{
		"server error": {http.StatusInternalServerError, "down", "auth: jwks url"},
		"not json":     {http.StatusOK, "<html>", "auth: jwks url"},
		"no usable":    {http.StatusOK, `{"keys":[]}`, "no RS256 or ES256 signing key"},
	} {
		srv.serve(tc.status, []byte(tc.body))
		c := JWTConfig{JWKSURL: srv.URL + "/jwks?token=secret", Issuer: "https://idp.example", Audience: "lethe"}
		_, err := New(Config{JWT: c, Logger: zap.NewNop()})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want one mentioning %q", name, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: error echoes the URL's query: %v", name, err)
		}
	}
}

// From the environment, JWT without an issuer or an audience refuses to start, naming the
// variable to set.
func TestFromEnvJWTRequiresIssuerAndAudience(t *testing.T) {
	for _, v := range []string{"LETHE_TOKENS", "LETHE_TOKENS_FILE", "LETHE_JWKS_FILE", "LETHE_JWKS_URL", "LETHE_JWT_HS256_SECRET_FILE", "LETHE_AUTH_DISABLED"} {
		t.Setenv(v, "")
	}
	t.Setenv("LETHE_JWT_HS256_SECRET", strings.Repeat("k", 32))
	for _, tc := range []struct{ iss, aud, want string }{
		{"", "lethe", "LETHE_JWT_ISSUER"},
		{"https://idp.example", "", "LETHE_JWT_AUDIENCE"},
		{"", "", "LETHE_JWT_ISSUER"},
	} {
		t.Setenv("LETHE_JWT_ISSUER", tc.iss)
		t.Setenv("LETHE_JWT_AUDIENCE", tc.aud)
		if a, err := fromEnv(); err == nil || !strings.Contains(err.Error(), "set "+tc.want) {
			t.Errorf("iss %q aud %q: %v %v, want a refusal naming %s", tc.iss, tc.aud, a, err, tc.want)
		}
	}
	t.Setenv("LETHE_JWT_ISSUER", "https://idp.example")
	t.Setenv("LETHE_JWT_AUDIENCE", "lethe")
	a, err := fromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.AuthenticateToken(signJWT(t, map[string]any{"alg": "HS256"}, claims(map[string]any{"exp": time.Now().Add(time.Hour).Unix(), "nbf": nil}), []byte(strings.Repeat("k", 32)))); err != nil {
		t.Errorf("a token with iss, aud and exp: %v", err)
	}
}

// fromEnv builds the Authenticator the environment's Settings declare.
func fromEnv() (*Authenticator, error) {
	var s Settings
	if err := envconf.FromEnv(&s); err != nil {
		return nil, err
	}
	return s.Authenticator()
}
