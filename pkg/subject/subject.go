// Package subject validates the identifiers of a data subject and turns them into keyed,
// tenant-scoped pseudonyms.
//
// A pseudonym is HMAC-SHA-256(key, tenant ‖ subject) in hex, where ‖ is an unambiguous
// length-prefixed concatenation, so the same person in two tenants gets two unlinkable
// pseudonyms and no pair of (tenant, subject) collides with another. The key id travels
// beside every pseudonym so the key can rotate. The key itself is never printed: Key has no
// exported fields and its String and GoString methods mask it.
package subject

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"os"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/lethe-erasure/lethe/pkg/envconf"
)

// MinKeyLen is the shortest pseudonym key accepted, in bytes.
const MinKeyLen = 32

// Limits on identifiers.
const (
	MaxTenantLen  = 63
	MaxSubjectLen = 256
	MaxSessions   = 1000
)

// ErrInvalid marks a request whose identifiers (or other fields) fail validation.
var ErrInvalid = errors.New("invalid request")

// Key is a pseudonym key with its id. The zero Key is unusable. Copies share one pool of
// keyed HMAC states, so a pseudonym costs its hashing, not a key schedule.
type Key struct {
	id     string
	secret []byte
	macs   *sync.Pool // of *mac
}

// mac is a keyed HMAC state and the buffer its input is assembled in.
type mac struct {
	h   hash.Hash
	buf []byte
}

// NewKey returns a key, or an error if the secret is shorter than MinKeyLen or id is empty.
func NewKey(id string, secret []byte) (Key, error) {
	if id == "" {
		return Key{}, errors.New("subject: key id is empty")
	}
	if len(secret) < MinKeyLen {
		return Key{}, fmt.Errorf("subject: key %q is %d bytes, need at least %d", id, len(secret), MinKeyLen)
	}
	k := Key{id: id, secret: append([]byte(nil), secret...)}
	k.macs = &sync.Pool{New: func() any { return &mac{h: hmac.New(sha256.New, k.secret)} }}
	return k, nil
}

// KeySettings declare the pseudonym key.
type KeySettings struct {
	Secret string `env:"LETHE_HMAC_KEY" secret:"true" doc:"Pseudonym key, at least 32 bytes; services refuse to start without it or its file (standalone generates a throwaway one and says so)."`
	File   string `env:"LETHE_HMAC_KEY_FILE" doc:"A file holding the pseudonym key, read when LETHE_HMAC_KEY is empty."`
	ID     string `env:"LETHE_HMAC_KEY_ID" default:"k1" doc:"Id of the pseudonym key, recorded in every request and receipt."`
}

// Set reports whether a key or its file is configured.
func (s KeySettings) Set() bool { return s.Secret != "" || s.File != "" }

// Key returns the key s declares, reading its file when the secret is empty.
func (s KeySettings) Key() (Key, error) {
	secret := s.Secret
	if secret == "" && s.File != "" {
		b, err := os.ReadFile(s.File)
		if err != nil {
			return Key{}, fmt.Errorf("subject: read key file: %w", err)
		}
		secret = strings.TrimRight(string(b), "\r\n")
	}
	if secret == "" {
		return Key{}, errors.New("subject: no pseudonym key: set LETHE_HMAC_KEY or LETHE_HMAC_KEY_FILE (at least 32 bytes)")
	}
	return NewKey(s.ID, []byte(secret))
}

// KeyFromEnv loads the KeySettings from the environment and returns their Key.
func KeyFromEnv() (Key, error) {
	var s KeySettings
	if err := envconf.FromEnv(&s); err != nil {
		return Key{}, err
	}
	return s.Key()
}

// ID is the key id.
func (k Key) ID() string { return k.id }

// String masks the secret.
func (k Key) String() string { return fmt.Sprintf("key(%s, ****)", k.id) }

// GoString masks the secret.
func (k Key) GoString() string { return k.String() }

// Derive returns a 32-byte key for label, derived from the secret with HKDF-SHA256 (no
// salt, label as info): distinct labels give independent keys, none of which reveals the
// secret or another. A derived key changes with the secret and is never to be stored.
func (k Key) Derive(label string) []byte {
	if len(k.secret) == 0 {
		panic("subject: zero Key used")
	}
	out, err := hkdf.Key(sha256.New, k.secret, nil, label, 32)
	if err != nil {
		panic(err) // only for a length HKDF-SHA256 cannot give
	}
	return out
}

// Pseudonym is the keyed, tenant-scoped pseudonym of subject in tenant.
func (k Key) Pseudonym(tenant, subject string) string {
	return k.sum(tenant, subject)
}

// SessionPseudonym is the keyed, tenant-scoped pseudonym of a session id in tenant. It is
// domain-separated from Pseudonym (a label part leads the HMAC input), so a session id
// never shares a pseudonym with a subject id of the same spelling.
func (k Key) SessionPseudonym(tenant, session string) string {
	return k.sum("session", tenant, session)
}

// Fingerprint is the keyed hash of a query: (tenant, subject, session, text).
func (k Key) Fingerprint(tenant, subject, session, text string) string {
	return k.sum(tenant, subject, session, text)
}

// PseudonymPrefix is the first 8 bytes of Pseudonym(tenant, subject), big-endian, computed
// without the hex string: for sets of pseudonym prefixes.
func (k Key) PseudonymPrefix(tenant, subject string) uint64 {
	var sum [sha256.Size]byte
	return binary.BigEndian.Uint64(k.sumInto(&sum, tenant, subject))
}

// SessionPseudonymPrefix is the first 8 bytes of SessionPseudonym(tenant, session).
func (k Key) SessionPseudonymPrefix(tenant, session string) uint64 {
	var sum [sha256.Size]byte
	return binary.BigEndian.Uint64(k.sumInto(&sum, "session", tenant, session))
}

func (k Key) sum(parts ...string) string {
	var sum [sha256.Size]byte
	return hex.EncodeToString(k.sumInto(&sum, parts...))
}

// sumInto writes the HMAC of the length-prefixed parts into sum and returns it as a slice.
func (k Key) sumInto(sum *[sha256.Size]byte, parts ...string) []byte {
	if len(k.secret) == 0 {
		panic("subject: zero Key used")
	}
	m := k.macs.Get().(*mac)
	m.h.Reset()
	m.buf = appendParts(m.buf[:0], parts...)
	m.h.Write(m.buf)
	out := m.h.Sum(sum[:0])
	k.macs.Put(m)
	return out
}

// appendParts appends each part length-prefixed so that no two part lists share an encoding.
func appendParts(b []byte, parts ...string) []byte {
	for _, p := range parts {
		b = binary.AppendUvarint(b, uint64(len(p)))
		b = append(b, p...)
	}
	return b
}

// ValidateTenant checks a tenant id: 1–63 characters of [a-z0-9_-], starting with a letter
// or digit. Tenant ids become collection names, key prefixes and object prefixes, so nothing
// else is allowed.
func ValidateTenant(t string) error {
	if t == "" || len(t) > MaxTenantLen {
		return fmt.Errorf("%w: tenant_id must be 1-%d characters", ErrInvalid, MaxTenantLen)
	}
	for i, r := range t {
		ok := r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || i > 0 && (r == '_' || r == '-')
		if !ok {
			return fmt.Errorf("%w: tenant_id may hold only a-z, 0-9, '_' and '-', starting with a letter or digit", ErrInvalid)
		}
	}
	return nil
}

// ValidateID checks a subject or session id: non-empty, at most MaxSubjectLen bytes, valid
// UTF-8, no control characters, and not blank (only white space or invisible format
// characters such as U+200B, which name no real subject). Any other character, glob
// metacharacters and delimiters included, is allowed, and leading or trailing spaces are
// kept (never trimmed): stores escape identifiers so they match only themselves.
func ValidateID(field, id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: %s is empty", ErrInvalid, field)
	case len(id) > MaxSubjectLen:
		return fmt.Errorf("%w: %s is longer than %d bytes", ErrInvalid, field, MaxSubjectLen)
	case !utf8.ValidString(id):
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalid, field)
	}
	blank := true
	for _, r := range id {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: %s holds a control character", ErrInvalid, field)
		}
		blank = blank && (unicode.IsSpace(r) || unicode.Is(unicode.Cf, r))
	}
	if blank {
		return fmt.Errorf("%w: %s is blank (only white space or invisible characters)", ErrInvalid, field)
	}
	return nil
}
