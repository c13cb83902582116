// Package integrity authenticates what Lethe's services hand one another and what they
// leave for auditors: HMAC-SHA-256 under per-deployment keys that never leave Lethe.
//
// A Ring holds the secrets of one key by id: the current secret signs, every secret of
// the ring verifies, so a key rotates by making a new secret current and keeping the old
// one in the ring until nothing signed with it needs verifying. Each use derives its own
// key from a secret with HKDF-SHA-256 (empty salt, the use's label as info, 32 bytes), so
// a MAC made for one use never verifies for another, even when one secret serves both.
//
// Records (record.go): Sign adds a MAC header to a Kafka record, Verify checks it. The
// MAC covers the record's value in Avro single-object encoding, the form every consumer
// reads after reframing, so it holds whichever framing the writer chose.
//
// Secrets are never printed or logged: every fmt verb prints a Ring's ids only, and no
// error holds a secret or a MAC.
package integrity

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
)

// MinSecretLen is the shortest secret accepted, in bytes.
const MinSecretLen = 32

// maxIDLen bounds a key id: it travels with every MAC.
const maxIDLen = 64

// Errors of Check and Verify. No retry makes a record that fails them pass.
var (
	// ErrUnknownKey means the MAC names a key id the ring does not hold.
	ErrUnknownKey = errors.New("integrity: MAC under a key id the key ring does not hold")
	// ErrMismatch means the MAC does not verify: the data was altered or the MAC forged.
	ErrMismatch = errors.New("integrity: MAC does not verify")
)

// Ring is a key's secrets by id. It is immutable and safe for concurrent use.
type Ring struct {
	current string
	secrets map[string][]byte
	derived sync.Map // id + "\x00" + label → derived key
}

// NewRing returns a ring whose current secret is secrets[current]. Each secret must be at
// least MinSecretLen bytes and not one byte repeated; ids are 1–64 characters of
// [A-Za-z0-9._-]. The secrets are copied.
func NewRing(current string, secrets map[string][]byte) (*Ring, error) {
	if _, ok := secrets[current]; !ok {
		return nil, fmt.Errorf("integrity: current key %q is not in the key ring", current)
	}
	r := &Ring{current: current, secrets: make(map[string][]byte, len(secrets))}
	for id, s := range secrets {
		if err := validID(id); err != nil {
			return nil, err
		}
		if err := strong(id, s); err != nil {
			return nil, err
		}
		r.secrets[id] = slices.Clone(s)
	}
	return r, nil
}

// MACSettings declare the record MAC key ring.
type MACSettings struct {
	Secret string `env:"LETHE_MAC_KEY" secret:"true" doc:"Record MAC key, at least 32 bytes, the same on every service (and for lethectl reapply): requests, reports and finds without a valid MAC under it are refused and dead-lettered; services refuse to start without it (standalone generates a throwaway one)."`
	File   string `env:"LETHE_MAC_KEY_FILE" doc:"A file holding the record MAC key (a trailing newline is dropped); set it or LETHE_MAC_KEY, not both."`
	ID     string `env:"LETHE_MAC_KEY_ID" default:"mac1" doc:"Id of the current record MAC key."`
	Old    string `env:"LETHE_MAC_KEY_OLD" secret:"true" doc:"Retired record MAC keys kept to verify records signed before a rotation: id:key,id:key."`
}

// Ring returns the ring s declares, or nil and no error when neither the key nor its file
// is set. Errors name the variable, never its value.
func (s MACSettings) Ring() (*Ring, error) {
	return ringOf("LETHE_MAC_KEY", s.Secret, s.File, s.ID, s.Old)
}

// ChainSettings declare the receipt chain key ring.
type ChainSettings struct {
	Secret string `env:"LETHE_CHAIN_KEY" secret:"true" doc:"Receipt chain key, at least 32 bytes: the aggregator MACs every receipt and addendum with it and refuses to start without it; give it to auditors for lethectl audit verify-chain --keyed, to no other service (standalone runs without one unless set)."`
	File   string `env:"LETHE_CHAIN_KEY_FILE" doc:"A file holding the receipt chain key (a trailing newline is dropped); set it or LETHE_CHAIN_KEY, not both."`
	ID     string `env:"LETHE_CHAIN_KEY_ID" default:"chain1" doc:"Id of the current receipt chain key."`
	Old    string `env:"LETHE_CHAIN_KEY_OLD" secret:"true" doc:"Earlier receipt chain keys, kept for good to verify older records: id:key,id:key."`
}

// Ring returns the ring s declares, or nil and no error when neither the key nor its file
// is set. Errors name the variable, never its value.
func (s ChainSettings) Ring() (*Ring, error) {
	return ringOf("LETHE_CHAIN_KEY", s.Secret, s.File, s.ID, s.Old)
}

// NotBoth refuses a secret set both in the variable name and in the file of name_FILE.
func NotBoth(name, val, file string) error {
	if val != "" && file != "" {
		return fmt.Errorf("integrity: set %s or %s_FILE, not both", name, name)
	}
	return nil
}

// ringOf builds the ring of the variables name, name_FILE, name_ID and name_OLD: the
// current secret as written or read from file, and older ones as "id:secret,id:secret"
// (a secret there holds no comma).
func ringOf(name, val, file, id, old string) (*Ring, error) {
	var cur []byte
	switch {
	case val != "" && file != "":
		return nil, NotBoth(name, val, file)
	case val != "":
		cur = []byte(val)
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("integrity: read %s_FILE: %w", name, err)
		}
		cur = []byte(strings.TrimRight(string(b), "\r\n"))
	default:
		return nil, nil
	}
	secrets := map[string][]byte{id: cur}
	if old = strings.TrimSpace(old); old != "" {
		for i, entry := range strings.Split(old, ",") {
			oid, s, ok := strings.Cut(strings.TrimSpace(entry), ":")
			if !ok {
				return nil, fmt.Errorf("integrity: %s_OLD entry %d is not id:secret", name, i+1)
			}
			if _, dup := secrets[oid]; dup {
				return nil, fmt.Errorf("integrity: %s_OLD: key id %q appears twice (or is the current id)", name, oid)
			}
			secrets[oid] = []byte(s)
		}
	}
	r, err := NewRing(id, secrets)
	if err != nil {
		return nil, fmt.Errorf("%w (%s)", err, name)
	}
	return r, nil
}

func validID(id string) error {
	if id == "" || len(id) > maxIDLen {
		return fmt.Errorf("integrity: key id must be 1-%d characters", maxIDLen)
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("integrity: key id %q may hold only A-Z, a-z, 0-9, '.', '_' and '-'", id)
		}
	}
	return nil
}

func strong(id string, s []byte) error {
	if len(s) < MinSecretLen {
		return fmt.Errorf("integrity: key %q is %d bytes, need at least %d", id, len(s), MinSecretLen)
	}
	for _, b := range s[1:] {
		if b != s[0] {
			return nil
		}
	}
	return fmt.Errorf("integrity: key %q is one byte repeated: use random bytes", id)
}

// CurrentID is the id of the secret that signs.
func (r *Ring) CurrentID() string { return r.current }

// IDs returns the id of every secret in the ring, sorted.
func (r *Ring) IDs() []string {
	ids := make([]string, 0, len(r.secrets))
	for id := range r.secrets {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Holds reports whether the ring holds the secret id.
func (r *Ring) Holds(id string) bool {
	_, ok := r.secrets[id]
	return ok
}

// Sum returns the MAC of data for the use label under the current secret, and its id.
func (r *Ring) Sum(label string, data []byte) (id string, mac []byte) {
	return r.current, r.sum(r.current, label, data)
}

// Check verifies that mac is the MAC of data for the use label under the secret id. It
// fails with ErrUnknownKey or ErrMismatch.
func (r *Ring) Check(label, id string, data, mac []byte) error {
	if !r.Holds(id) {
		return fmt.Errorf("%w: %q (ring %v)", ErrUnknownKey, id, r.IDs())
	}
	if !hmac.Equal(r.sum(id, label, data), mac) {
		return ErrMismatch
	}
	return nil
}

func (r *Ring) sum(id, label string, data []byte) []byte {
	m := hmac.New(sha256.New, r.key(id, label))
	m.Write(data)
	return m.Sum(nil)
}

// key is the key derived from the secret id for label: HKDF-SHA-256 with an empty salt.
func (r *Ring) key(id, label string) []byte {
	k := id + "\x00" + label
	if v, ok := r.derived.Load(k); ok {
		return v.([]byte)
	}
	d, err := hkdf.Key(sha256.New, r.secrets[id], nil, label, sha256.Size)
	if err != nil {
		panic("integrity: hkdf: " + err.Error()) // only for lengths over 255 blocks
	}
	v, _ := r.derived.LoadOrStore(k, d)
	return v.([]byte)
}

// String masks the secrets.
func (r *Ring) String() string {
	if r == nil {
		return "none"
	}
	return fmt.Sprintf("ring(current=%s, ids=%v, ****)", r.current, r.IDs())
}

// GoString masks the secrets.
func (r *Ring) GoString() string { return r.String() }

// Format prints String for every verb.
func (r *Ring) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, r.String()) }
