package auth

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"gopkg.in/yaml.v3"
)

// TokenPrefix starts every token minted by NewToken, so a leaked one is recognisable
// (secret scanners) and never mistaken for a JWT.
const TokenPrefix = "lt_"

// Token is one configured opaque token: the principal it authenticates, the hex SHA-256
// of the token (HashToken) and the tenants it may act for. The token itself is never
// configured or stored.
type Token struct {
	Name    string   `yaml:"name" json:"name"`
	SHA256  string   `yaml:"token_sha256" json:"token_sha256"`
	Tenants []string `yaml:"tenants" json:"tenants"`
	Roles   []string `yaml:"roles,omitempty" json:"roles,omitempty"` // e.g. approver
}

// HashToken returns the lower-case hex SHA-256 of token, the form in which tokens are
// configured. A fast unsalted hash is appropriate because tokens are 256-bit random
// strings: there is no dictionary to precompute and nothing to slow down, unlike
// passwords, for which a slow salted hash (argon2, bcrypt) would be required.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// NewToken mints a token: TokenPrefix followed by 32 random bytes in unpadded base64url,
// and its hash (HashToken of the whole token, prefix included). Hand the token to the
// caller once; configure only the hash.
func NewToken() (token, hash string) {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error
	token = TokenPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	return token, HashToken(token)
}

// ParseTokensFile parses a tokens file: a YAML or JSON list of {name, token_sha256,
// tenants}. Unknown fields are errors, so a misspelt key does not silently drop a tenant.
func ParseTokensFile(data []byte) ([]Token, error) {
	var toks []Token
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, errors.New("auth: tokens file is empty")
	}
	if trimmed[0] == '[' || trimmed[0] == '{' {
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&toks); err != nil {
			return nil, fmt.Errorf("auth: tokens file: json: %w", err)
		}
	} else {
		dec := yaml.NewDecoder(bytes.NewReader(trimmed))
		dec.KnownFields(true)
		if err := dec.Decode(&toks); err != nil {
			return nil, fmt.Errorf("auth: tokens file: yaml: %w", err)
		}
	}
	if len(toks) == 0 {
		return nil, errors.New("auth: tokens file lists no tokens")
	}
	return toks, nil
}

// ParseTokensEnv parses the LETHE_TOKENS form: entries separated by ";", each
// "name:sha256hex:tenant1|tenant2". Surrounding spaces and a trailing ";" are allowed.
func ParseTokensEnv(s string) ([]Token, error) {
	var toks []Token
	for i, entry := range strings.Split(s, ";") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		fields := strings.Split(entry, ":")
		if len(fields) != 3 {
			return nil, fmt.Errorf("auth: LETHE_TOKENS entry %d: want name:sha256hex:tenant1|tenant2, got %d fields", i+1, len(fields))
		}
		var tenants []string
		for t := range strings.SplitSeq(fields[2], "|") {
			tenants = append(tenants, strings.TrimSpace(t))
		}
		toks = append(toks, Token{
			Name:    strings.TrimSpace(fields[0]),
			SHA256:  strings.TrimSpace(fields[1]),
			Tenants: tenants,
		})
	}
	if len(toks) == 0 {
		return nil, errors.New("auth: LETHE_TOKENS lists no tokens")
	}
	return toks, nil
}

// tokenEntry is a compiled Token.
type tokenEntry struct {
	hash      [sha256.Size]byte
	principal Principal
}

// compileTokens validates toks and decodes their hashes. Errors name the entry, never its
// hash value (which might be a pasted plain token).
func compileTokens(toks []Token) ([]tokenEntry, error) {
	entries := make([]tokenEntry, 0, len(toks))
	names := map[string]bool{}
	hashes := map[[sha256.Size]byte]bool{}
	for i, t := range toks {
		where := fmt.Sprintf("token %d (%q)", i+1, t.Name)
		if err := validName(t.Name); err != nil {
			return nil, fmt.Errorf("auth: token %d: %w", i+1, err)
		}
		if names[t.Name] {
			return nil, fmt.Errorf("auth: %s: duplicate name", where)
		}
		names[t.Name] = true
		h, err := decodeHash(t.SHA256)
		if err != nil {
			return nil, fmt.Errorf("auth: %s: %w", where, err)
		}
		if hashes[h] {
			return nil, fmt.Errorf("auth: %s: same token_sha256 as an earlier entry", where)
		}
		hashes[h] = true
		if len(t.Tenants) == 0 {
			return nil, fmt.Errorf("auth: %s: no tenants (use %q for an operator)", where, Wildcard)
		}
		for _, tenant := range t.Tenants {
			if err := validTenant(tenant); err != nil {
				return nil, fmt.Errorf("auth: %s: %w", where, err)
			}
		}
		entries = append(entries, tokenEntry{hash: h, principal: Principal{Name: t.Name, Tenants: slices.Clone(t.Tenants), Roles: slices.Clone(t.Roles)}})
	}
	return entries, nil
}

func decodeHash(s string) ([sha256.Size]byte, error) {
	var h [sha256.Size]byte
	switch {
	case s == "":
		return h, errors.New("token_sha256 is missing")
	case strings.HasPrefix(s, TokenPrefix):
		return h, errors.New("token_sha256 holds a plain token; configure HashToken(token) instead and rotate the token")
	case len(s) != 2*sha256.Size:
		return h, fmt.Errorf("token_sha256 must be %d hex characters (the SHA-256 of the token), got %d characters", 2*sha256.Size, len(s))
	}
	if _, err := hex.Decode(h[:], []byte(s)); err != nil {
		return h, errors.New("token_sha256 is not hexadecimal")
	}
	return h, nil
}

// validName accepts principal names that are safe in logs and in LETHE_TOKENS.
func validName(name string) error {
	if name == "" || len(name) > 64 {
		return errors.New("name must have 1 to 64 characters")
	}
	for _, r := range name {
		if r > unicode.MaxASCII || !(unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("._@-", r)) {
			return fmt.Errorf("name %q: only letters, digits and . _ @ - are allowed", name)
		}
	}
	return nil
}

// validTenant rejects empty tenants, whitespace, and "*" inside a tenant, which would
// suggest pattern matching that May does not do.
func validTenant(t string) error {
	switch {
	case t == Wildcard:
		return nil
	case t == "":
		return errors.New("empty tenant")
	case strings.Contains(t, Wildcard):
		return fmt.Errorf("tenant %q: %q grants every tenant only as a whole entry; tenants match exactly", t, Wildcard)
	case strings.IndexFunc(t, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
		return fmt.Errorf("tenant %q contains whitespace or control characters", t)
	}
	return nil
}

// lookup finds the principal of an opaque token. It hashes the token and compares the
// digest with every configured hash using subtle.ConstantTimeCompare, without stopping
// at a match, so the time taken depends only on the number of configured tokens (tens),
// not on which one matched or how many leading bytes agreed. An index by a token-id
// prefix would be faster for thousands of tokens but adds a second secret-derived lookup
// path; a scan is simpler and obviously uniform.
func (a *Authenticator) lookup(token string) (Principal, error) {
	sum := sha256.Sum256([]byte(token))
	found := -1
	for i := range a.tokens {
		eq := subtle.ConstantTimeCompare(sum[:], a.tokens[i].hash[:])
		found = subtle.ConstantTimeSelect(eq, i, found)
	}
	if found < 0 {
		return Principal{}, fmt.Errorf("%w: unknown token", ErrUnauthenticated)
	}
	p := a.tokens[found].principal
	return Principal{Name: p.Name, Tenants: slices.Clone(p.Tenants), Roles: slices.Clone(p.Roles)}, nil
}
