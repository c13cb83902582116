package auth

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"
)

// MinHS256SecretBytes is the shortest accepted HS256 secret (the HMAC-SHA-256 output size).
const MinHS256SecretBytes = 32

// DefaultLeeway is the clock skew allowed when checking exp and nbf.
const DefaultLeeway = 30 * time.Second

// DefaultTenantClaim names the JWT claim that lists a principal's tenants.
const DefaultTenantClaim = "tenants"

// JWTConfig configures JWT verification. Tokens signed with HS256 verify only against
// HS256Secret; tokens signed with RS256 or ES256 verify only against an RSA or P-256 key
// of the JWKS (of that key type, with a matching kid when the token names one, and with a
// matching alg when the key names one). No other algorithm, "none" included, is accepted,
// and no key is ever used with another algorithm, which rules out algorithm confusion
// (an HS256 token MACed with an RSA public key).
//
// A token must carry exp; nbf is checked when present; iss and aud are checked when
// Issuer and Audience are set. The principal's name is the sub claim ("jwt" without one);
// its tenants are the TenantClaim claim, a string (one tenant) or an array of strings,
// where "*" grants every tenant: issue such tokens to operators only.
type JWTConfig struct {
	HS256Secret []byte        // >= MinHS256SecretBytes; nil = HS256 is not accepted
	JWKS        []byte        // a JSON Web Key Set; nil = RS256/ES256 are not accepted
	Issuer      string        // required iss; "" = not checked
	Audience    string        // required member of aud; "" = not checked
	TenantClaim string        // default DefaultTenantClaim
	Leeway      time.Duration // default DefaultLeeway
}

func (c JWTConfig) enabled() bool { return len(c.HS256Secret) > 0 || len(c.JWKS) > 0 }

// String describes c with the secret masked.
func (c JWTConfig) String() string {
	if !c.enabled() {
		return "off"
	}
	secret := "unset"
	if len(c.HS256Secret) > 0 {
		secret = "***"
	}
	return fmt.Sprintf("{hs256_secret: %s, jwks: %d bytes, iss: %q, aud: %q, tenant_claim: %q}",
		secret, len(c.JWKS), c.Issuer, c.Audience, c.TenantClaim)
}

// GoString is String, so %#v prints no secret either.
func (c JWTConfig) GoString() string { return c.String() }

type publicKey struct {
	kid, alg string
	rsa      *rsa.PublicKey
	ec       *ecdsa.PublicKey
}

type jwtVerifier struct {
	hs       []byte
	keys     []publicKey
	iss, aud string
	claim    string
	leeway   time.Duration
	now      func() time.Time
}

func newJWTVerifier(c JWTConfig, now func() time.Time) (*jwtVerifier, error) {
	v := &jwtVerifier{iss: c.Issuer, aud: c.Audience, claim: c.TenantClaim, leeway: c.Leeway, now: now}
	if v.claim == "" {
		v.claim = DefaultTenantClaim
	}
	if v.leeway <= 0 {
		v.leeway = DefaultLeeway
	}
	if v.now == nil {
		v.now = time.Now
	}
	if len(c.HS256Secret) > 0 {
		if len(c.HS256Secret) < MinHS256SecretBytes {
			return nil, fmt.Errorf("auth: jwt hs256 secret must have at least %d bytes, has %d", MinHS256SecretBytes, len(c.HS256Secret))
		}
		v.hs = bytes.Clone(c.HS256Secret)
	}
	if len(c.JWKS) > 0 {
		keys, err := parseJWKS(c.JWKS)
		if err != nil {
			return nil, err
		}
		v.keys = keys
	}
	return v, nil
}

func (v *jwtVerifier) String() string {
	return fmt.Sprintf("{hs256: %t, keys: %d, iss: %q, aud: %q, tenant_claim: %q}", v.hs != nil, len(v.keys), v.iss, v.aud, v.claim)
}

// parseJWKS parses a JSON Web Key Set and returns its RSA (>= 2048 bits) and P-256 EC
// signing keys. Keys of other types or curves, and keys marked for encryption, are
// skipped; a set with no usable key is an error.
func parseJWKS(data []byte) ([]publicKey, error) {
	var set struct {
		Keys []struct {
			Kty string `json:"kty"`
			Kid string `json:"kid"`
			Alg string `json:"alg"`
			Use string `json:"use"`
			Crv string `json:"crv"`
			N   string `json:"n"`
			E   string `json:"e"`
			X   string `json:"x"`
			Y   string `json:"y"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("auth: jwks: %w", err)
	}
	var keys []publicKey
	for i, k := range set.Keys {
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		pk := publicKey{kid: k.Kid, alg: k.Alg}
		switch {
		case k.Kty == "RSA" && (k.Alg == "" || k.Alg == "RS256"):
			n, err1 := b64(k.N)
			e, err2 := b64(k.E)
			if err := errors.Join(err1, err2); err != nil || len(e) == 0 || len(e) > 4 {
				return nil, fmt.Errorf("auth: jwks key %d: bad RSA modulus or exponent", i+1)
			}
			pk.rsa = &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
			if pk.rsa.N.BitLen() < 2048 || pk.rsa.E < 3 || pk.rsa.E%2 == 0 {
				return nil, fmt.Errorf("auth: jwks key %d: RSA key must have >= 2048 bits and an odd exponent >= 3", i+1)
			}
		case k.Kty == "EC" && k.Crv == "P-256" && (k.Alg == "" || k.Alg == "ES256"):
			x, err1 := b64(k.X)
			y, err2 := b64(k.Y)
			if err := errors.Join(err1, err2); err != nil || len(x) != 32 || len(y) != 32 {
				return nil, fmt.Errorf("auth: jwks key %d: bad P-256 coordinates", i+1)
			}
			pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, x...), y...))
			if err != nil {
				return nil, fmt.Errorf("auth: jwks key %d: %w", i+1, err)
			}
			pk.ec = pub
		default:
			continue
		}
		keys = append(keys, pk)
	}
	if len(keys) == 0 {
		return nil, errors.New("auth: jwks holds no RS256 or ES256 signing key")
	}
	return keys, nil
}

func b64(s string) ([]byte, error) { return base64.RawURLEncoding.Strict().DecodeString(s) }

func invalid(reason string) error {
	return fmt.Errorf("%w: invalid jwt: %s", ErrUnauthenticated, reason)
}

// verify checks a compact JWS and returns its principal.
func (v *jwtVerifier) verify(token string) (Principal, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return Principal{}, invalid("want three segments")
	}
	var header struct {
		Alg  string   `json:"alg"`
		Kid  string   `json:"kid"`
		Crit []string `json:"crit"`
	}
	raw, err := b64(parts[0])
	if err != nil || json.Unmarshal(raw, &header) != nil {
		return Principal{}, invalid("malformed header")
	}
	if len(header.Crit) > 0 {
		return Principal{}, invalid("critical header extensions are not supported")
	}
	sig, err := b64(parts[2])
	if err != nil || len(sig) == 0 {
		return Principal{}, invalid("malformed signature")
	}
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := v.checkSignature(header.Alg, header.Kid, parts[0]+"."+parts[1], digest[:], sig); err != nil {
		return Principal{}, err
	}
	payload, err := b64(parts[1])
	if err != nil {
		return Principal{}, invalid("malformed payload")
	}
	return v.principal(payload)
}

func (v *jwtVerifier) checkSignature(alg, kid, signingInput string, digest, sig []byte) error {
	switch alg {
	case "HS256":
		if v.hs == nil {
			return invalid("HS256 is not accepted")
		}
		mac := hmac.New(sha256.New, v.hs)
		mac.Write([]byte(signingInput))
		if !hmac.Equal(mac.Sum(nil), sig) {
			return invalid("bad signature")
		}
		return nil
	case "RS256", "ES256":
		tried := false
		for _, k := range v.keys {
			if (kid != "" && k.kid != kid) || (k.alg != "" && k.alg != alg) {
				continue
			}
			switch {
			case alg == "RS256" && k.rsa != nil:
				tried = true
				if rsa.VerifyPKCS1v15(k.rsa, crypto.SHA256, digest, sig) == nil {
					return nil
				}
			case alg == "ES256" && k.ec != nil:
				tried = true
				if len(sig) != 64 {
					continue // ES256 signatures are r || s, 32 bytes each
				}
				r, s := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])
				if ecdsa.Verify(k.ec, digest, r, s) {
					return nil
				}
			}
		}
		if !tried {
			return invalid("no " + alg + " key matches")
		}
		return invalid("bad signature")
	}
	return invalid("unsupported signing algorithm")
}

// principal checks the claims of a verified payload and builds the principal.
func (v *jwtVerifier) principal(payload []byte) (Principal, error) {
	var claims map[string]any
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	if err := dec.Decode(&claims); err != nil || claims == nil {
		return Principal{}, invalid("malformed claims")
	}
	now := v.now()
	exp, ok, err := numericDate(claims["exp"])
	switch {
	case err != nil:
		return Principal{}, invalid("exp is not a number")
	case !ok:
		return Principal{}, invalid("exp is missing")
	case now.After(exp.Add(v.leeway)):
		return Principal{}, invalid("expired")
	}
	nbf, ok, err := numericDate(claims["nbf"])
	switch {
	case err != nil:
		return Principal{}, invalid("nbf is not a number")
	case ok && now.Before(nbf.Add(-v.leeway)):
		return Principal{}, invalid("not valid yet")
	}
	if v.iss != "" {
		if iss, _ := claims["iss"].(string); iss != v.iss {
			return Principal{}, invalid("wrong issuer")
		}
	}
	if v.aud != "" {
		auds, ok := stringOrList(claims["aud"])
		if !ok || !containsString(auds, v.aud) {
			return Principal{}, invalid("wrong audience")
		}
	}
	tenants, ok := stringOrList(claims[v.claim])
	if !ok {
		return Principal{}, invalid("claim " + v.claim + " must be a string or an array of strings")
	}
	if len(tenants) == 0 || containsString(tenants, "") {
		return Principal{}, invalid("claim " + v.claim + " grants no tenant")
	}
	name, _ := claims["sub"].(string)
	if name == "" {
		name = "jwt"
	}
	return Principal{Name: name, Tenants: tenants}, nil
}

// numericDate reads a JWT NumericDate (seconds since the epoch, possibly fractional).
func numericDate(v any) (t time.Time, ok bool, err error) {
	if v == nil {
		return time.Time{}, false, nil
	}
	n, isNum := v.(json.Number)
	if !isNum {
		return time.Time{}, false, errors.New("not a number")
	}
	f, err := n.Float64()
	if err != nil {
		return time.Time{}, false, err
	}
	sec := int64(f)
	return time.Unix(sec, int64((f-float64(sec))*1e9)), true, nil
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

func containsString(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}
