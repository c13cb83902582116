package auth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"go.uber.org/zap"
	"golang.org/x/time/rate"
)

// DefaultJWKSRefresh is how often a key set file or URL is read again.
const DefaultJWKSRefresh = 10 * time.Minute

// DefaultUnknownKIDInterval bounds the refreshes that tokens naming an unknown kid cause:
// at most one per interval, so that forged kids cannot make Lethe hammer the identity
// provider. A token whose kid is still unknown after the refresh, or that arrives while the
// limit holds, is refused; the scheduled refresh picks the key up in any case.
const DefaultUnknownKIDInterval = time.Minute

// JWKSFetchTimeout bounds one read of a key set file or URL, and how long a token with an
// unknown kid waits for the refresh it causes.
const JWKSFetchTimeout = 5 * time.Second

// keySetName describes where c's keys come from.
func (c JWTConfig) keySetName() string {
	switch {
	case c.JWKSURL != "":
		return fmt.Sprintf("url %s (refresh %s)", redactURL(c.JWKSURL), c.refreshInterval())
	case c.JWKSFile != "":
		return fmt.Sprintf("file %s (refresh %s)", c.JWKSFile, c.refreshInterval())
	case len(c.JWKS) > 0:
		return fmt.Sprintf("fixed, %d bytes", len(c.JWKS))
	}
	return "none"
}

func (c JWTConfig) refreshInterval() time.Duration {
	if c.RefreshInterval > 0 {
		return c.RefreshInterval
	}
	return DefaultJWKSRefresh
}

func (c JWTConfig) unknownKIDInterval() time.Duration {
	if c.UnknownKIDInterval > 0 {
		return c.UnknownKIDInterval
	}
	return DefaultUnknownKIDInterval
}

// openKeySet returns c's key set: fixed, or read from a file or URL and refreshed until ctx
// ends. It fails when the set cannot be read or holds no usable key.
func openKeySet(ctx context.Context, c JWTConfig, log *zap.Logger) (jwkset.Storage, error) {
	n := 0
	for _, set := range []bool{len(c.JWKS) > 0, c.JWKSFile != "", c.JWKSURL != ""} {
		if set {
			n++
		}
	}
	if n > 1 {
		return nil, errors.New("auth: jwks: configure one key set (LETHE_JWKS_FILE or LETHE_JWKS_URL), not several")
	}
	var store jwkset.Storage
	if len(c.JWKS) > 0 {
		keys, err := parseJWKS(c.JWKS)
		if err != nil {
			return nil, err
		}
		mem := jwkset.NewMemoryStorage()
		if err := mem.KeyReplaceAll(ctx, keys); err != nil {
			return nil, fmt.Errorf("auth: jwks: %w", err)
		}
		store = mem
	} else {
		var err error
		if store, err = refreshingKeySet(ctx, c, log); err != nil {
			return nil, err
		}
	}
	all, err := store.KeyReadAll(ctx)
	if err != nil {
		return nil, fmt.Errorf("auth: jwks: %w", err)
	}
	for _, k := range all {
		if _, ok := usableKey(k, "RS256"); ok {
			return store, nil
		}
		if _, ok := usableKey(k, "ES256"); ok {
			return store, nil
		}
	}
	return nil, errors.New("auth: jwks holds no RS256 or ES256 signing key (RSA of at least 2048 bits, or P-256)")
}

// refreshingKeySet reads c's key set file or URL through keyfunc's HTTP storage, which
// refreshes it on a schedule and on an unknown kid. A file is read through net/http's file
// transport, so that a file and a URL share one refresh path.
func refreshingKeySet(ctx context.Context, c JWTConfig, log *zap.Logger) (jwkset.Storage, error) {
	var (
		u      string
		client *http.Client
		what   string
	)
	if c.JWKSFile != "" {
		path, err := filepath.Abs(c.JWKSFile)
		if err != nil {
			return nil, fmt.Errorf("auth: jwks file: %w", err)
		}
		fi, err := os.Stat(path)
		if err != nil {
			return nil, fmt.Errorf("auth: jwks file: %w", err)
		}
		if !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("auth: jwks file %s is not a regular file", c.JWKSFile)
		}
		dir := http.Dir(filepath.Dir(path))
		client = &http.Client{Transport: http.NewFileTransport(dir), Timeout: JWKSFetchTimeout}
		u = (&url.URL{Scheme: "file", Path: "/" + filepath.Base(path)}).String()
		what = "file " + c.JWKSFile
	} else {
		parsed, err := url.Parse(c.JWKSURL)
		if err != nil || parsed.Host == "" {
			return nil, errors.New("auth: jwks url is not an absolute URL")
		}
		if parsed.Scheme != "https" && (parsed.Scheme != "http" || !loopback(parsed.Hostname())) {
			return nil, errors.New("auth: jwks url must be https (plain http only on a loopback host): keys fetched in the clear could be replaced")
		}
		client = c.HTTPClient
		if client == nil {
			client = &http.Client{Timeout: JWKSFetchTimeout}
		}
		u = c.JWKSURL
		what = "url " + redactURL(c.JWKSURL)
	}
	firstMustSucceed := false
	kf, err := keyfunc.NewDefaultOverrideCtx(ctx, []string{u}, keyfunc.Override{
		Client:                    client,
		HTTPTimeout:               JWKSFetchTimeout,
		NoErrorReturnFirstHTTPReq: &firstMustSucceed,
		RateLimitWaitMax:          JWKSFetchTimeout,
		RefreshInterval:           c.refreshInterval(),
		RefreshUnknownKID:         rate.NewLimiter(rate.Every(c.unknownKIDInterval()), 1),
		RefreshErrorHandlerFunc: func(string) func(context.Context, error) {
			return func(_ context.Context, err error) {
				log.Warn("jwks refresh failed; keeping the previous keys", zap.String("jwks", what), zap.Error(err))
			}
		},
	})
	if err != nil {
		// The library's message names the URL as given, query and all: say it redacted.
		msg := strings.ReplaceAll(strings.ReplaceAll(err.Error(), u, redactURL(u)), "\n", "; ")
		return nil, fmt.Errorf("auth: jwks %s: %s", what, msg)
	}
	return kf.Storage(), nil
}

// parseJWKS parses a fixed JSON Web Key Set. Keys of types the library does not support
// are skipped; a malformed key is an error.
func parseJWKS(data []byte) ([]jwkset.JWK, error) {
	var set jwkset.JWKSMarshal
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("auth: jwks: %w", err)
	}
	keys := make([]jwkset.JWK, 0, len(set.Keys))
	for i, m := range set.Keys {
		k, err := jwkset.NewJWKFromMarshal(m, jwkset.JWKMarshalOptions{}, jwkset.JWKValidateOptions{})
		switch {
		case errors.Is(err, jwkset.ErrUnsupportedKey):
			continue
		case err != nil:
			return nil, fmt.Errorf("auth: jwks key %d: %w", i+1, err)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// usableKey returns k's public key when it may verify a token signed with alg: k is for
// signatures (use "sig" or none), names alg or no alg, and is an RSA key of at least 2048
// bits for RS256 or a P-256 key for ES256.
func usableKey(k jwkset.JWK, alg string) (crypto.PublicKey, bool) {
	m := k.Marshal()
	if m.USE != "" && m.USE != jwkset.UseSig || m.ALG != "" && m.ALG.String() != alg {
		return nil, false
	}
	key := k.Key()
	if priv, ok := key.(interface{ Public() crypto.PublicKey }); ok {
		key = priv.Public() // a set that holds a private key by mistake
	}
	switch pub := key.(type) {
	case *rsa.PublicKey:
		return pub, alg == "RS256" && pub.N.BitLen() >= 2048 && pub.E >= 3 && pub.E%2 == 1
	case *ecdsa.PublicKey:
		return pub, alg == "ES256" && pub.Curve == elliptic.P256()
	}
	return nil, false
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// redactURL drops a URL's user information and query, which may hold credentials.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable)"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return strings.TrimSuffix(u.String(), "?")
}
