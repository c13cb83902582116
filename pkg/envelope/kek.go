package envelope

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/lethe-erasure/lethe/pkg/envconf"
)

// KeySize is the size in bytes of every key-encryption key and data key (AES-256).
const KeySize = 32

// maxKEKIDLen bounds a KEK id: it is written into every wrapped data key.
const maxKEKIDLen = 64

// wrapVersion is the first byte of a wrapped data key.
const wrapVersion = 1

// KEK is a key-encryption key ring: the current key, which wraps new data keys, and older
// keys kept only to unwrap data keys that were wrapped before a rotation. It is immutable
// and safe for concurrent use. Its secrets are never printed: every fmt verb, including
// %v, %+v, %#v, %x and %d, prints only the key ids.
type KEK struct {
	current string
	aeads   map[string]cipher.AEAD
}

// NewKEK returns a key ring whose current key is keys[currentID]. Every key must be exactly
// KeySize bytes and not one byte repeated; ids are 1–64 characters of [A-Za-z0-9._-]. The
// keys are copied into AES-GCM ciphers; the caller may clear its slices afterwards.
func NewKEK(currentID string, keys map[string][]byte) (*KEK, error) {
	if _, ok := keys[currentID]; !ok {
		return nil, fmt.Errorf("envelope: current key-encryption key %q is not in the key ring", currentID)
	}
	k := &KEK{current: currentID, aeads: make(map[string]cipher.AEAD, len(keys))}
	for id, key := range keys {
		if err := validKEKID(id); err != nil {
			return nil, err
		}
		if err := strongKey(id, key); err != nil {
			return nil, err
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, fmt.Errorf("envelope: key-encryption key %q: %w", id, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("envelope: key-encryption key %q: %w", id, err)
		}
		k.aeads[id] = aead
	}
	return k, nil
}

// KEKSettings declare the key-encryption key ring.
type KEKSettings struct {
	Secret string `env:"LETHE_KEK" secret:"true" doc:"Key-encryption key that wraps each request's data key: standard or URL base64, padded or not, of exactly 32 bytes; required unless LETHE_KEK_KMS_CIPHERTEXT is set (standalone generates a throwaway one)."`
	File   string `env:"LETHE_KEK_FILE" doc:"A file holding the key-encryption key as base64 text or exactly 32 raw bytes; set it or LETHE_KEK, not both."`
	ID     string `env:"LETHE_KEK_ID" default:"kek1" doc:"Id of the current key-encryption key."`
	Old    string `env:"LETHE_KEK_OLD" secret:"true" doc:"Retired key-encryption keys kept to unwrap older data keys after a rotation: id:base64,id:base64."`
	// KMS is the key-encryption key that AWS KMS keeps wrapped.
	KMS KMSSettings
}

// KMSSettings declare key-encryption keys that AWS KMS generated and wraps: the services
// hold only their ciphertexts and ask KMS to decrypt them at start (kmskek).
type KMSSettings struct {
	Ciphertext string `env:"LETHE_KEK_KMS_CIPHERTEXT" doc:"The current key-encryption key as AWS KMS wrapped it: base64 of GenerateDataKey's CiphertextBlob (lethectl keys kms-generate), decrypted with KMS at start and kept in memory only; set it or LETHE_KEK, not both."`
	Old        string `env:"LETHE_KEK_KMS_OLD" doc:"Retired KMS-wrapped key-encryption keys kept to unwrap older data keys after a rotation: id:base64,id:base64."`
	Endpoint   string `env:"LETHE_KMS_ENDPOINT" doc:"AWS KMS endpoint (a local KMS, tests); empty: AWS."`
}

// Set reports whether a KMS-wrapped key is configured.
func (s KMSSettings) Set() bool { return s.Ciphertext != "" || s.Old != "" }

// Decrypter returns the plaintext of a key-encryption key that KMS wrapped, given its id
// (the encryption context it was generated with) and ciphertext.
type Decrypter func(ctx context.Context, kekID string, ciphertext []byte) ([]byte, error)

// Validate refuses both a key and its file, and a key both given and KMS-wrapped.
func (s KEKSettings) Validate() error {
	switch {
	case s.Secret != "" && s.File != "":
		return errors.New("envelope: set LETHE_KEK or LETHE_KEK_FILE, not both")
	case s.KMS.Ciphertext != "" && (s.Secret != "" || s.File != ""):
		return errors.New("envelope: set LETHE_KEK_KMS_CIPHERTEXT or LETHE_KEK (LETHE_KEK_FILE), not both")
	}
	return nil
}

// Set reports whether a key, its file or its KMS ciphertext is configured.
func (s KEKSettings) Set() bool { return s.Secret != "" || s.File != "" || s.KMS.Ciphertext != "" }

// KEK returns the ring s declares, without KMS (KEKWith). A missing, short, long or
// constant key is an error; errors name the variable, never its value.
func (s KEKSettings) KEK() (*KEK, error) { return s.KEKWith(context.Background(), nil) }

// KEKWith returns the ring s declares, its KMS-wrapped keys decrypted with decrypt (nil:
// KMS-wrapped keys are an error).
func (s KEKSettings) KEKWith(ctx context.Context, decrypt Decrypter) (*KEK, error) {
	if s.KMS.Set() && decrypt == nil {
		return nil, errors.New("envelope: LETHE_KEK_KMS_CIPHERTEXT or LETHE_KEK_KMS_OLD is set, and this process has no AWS KMS client")
	}
	keys := map[string][]byte{}
	if s.KMS.Ciphertext != "" {
		b, err := kmsKey(ctx, decrypt, s.ID, s.KMS.Ciphertext)
		if err != nil {
			return nil, fmt.Errorf("envelope: LETHE_KEK_KMS_CIPHERTEXT: %w", err)
		}
		keys[s.ID] = b
	}
	if old := strings.TrimSpace(s.KMS.Old); old != "" {
		for i, entry := range strings.Split(old, ",") {
			oid, enc, ok := strings.Cut(strings.TrimSpace(entry), ":")
			if !ok {
				return nil, fmt.Errorf("envelope: LETHE_KEK_KMS_OLD entry %d is not id:base64", i+1)
			}
			if _, dup := keys[oid]; dup || oid == s.ID {
				return nil, fmt.Errorf("envelope: LETHE_KEK_KMS_OLD: key id %q appears twice (or is the current id)", oid)
			}
			b, err := kmsKey(ctx, decrypt, oid, enc)
			if err != nil {
				return nil, fmt.Errorf("envelope: LETHE_KEK_KMS_OLD key %q: %w", oid, err)
			}
			keys[oid] = b
		}
	}
	if s.KMS.Ciphertext != "" {
		return s.withOld(keys)
	}
	var cur []byte
	switch {
	case s.Secret != "":
		b, err := decodeKey(s.Secret)
		if err != nil {
			return nil, fmt.Errorf("envelope: LETHE_KEK: %w", err)
		}
		cur = b
	case s.File != "":
		raw, err := os.ReadFile(s.File)
		if err != nil {
			return nil, fmt.Errorf("envelope: read LETHE_KEK_FILE: %w", err)
		}
		b, err := decodeKey(string(raw))
		if err != nil && len(raw) == KeySize {
			b, err = raw, nil
		}
		if err != nil {
			return nil, fmt.Errorf("envelope: LETHE_KEK_FILE: %w", err)
		}
		cur = b
	default:
		return nil, errors.New("envelope: no key-encryption key: set LETHE_KEK (base64 of 32 random bytes), LETHE_KEK_FILE or LETHE_KEK_KMS_CIPHERTEXT")
	}
	if _, dup := keys[s.ID]; dup {
		return nil, fmt.Errorf("envelope: LETHE_KEK_KMS_OLD: key id %q is the current id", s.ID)
	}
	keys[s.ID] = cur
	return s.withOld(keys)
}

// kmsKey decrypts the base64 ciphertext of the KMS-wrapped key id.
func kmsKey(ctx context.Context, decrypt Decrypter, id, b64 string) ([]byte, error) {
	blob, err := base64.StdEncoding.DecodeString(strings.TrimSpace(b64))
	if err != nil {
		return nil, errors.New("not standard base64")
	}
	return decrypt(ctx, id, blob)
}

// withOld adds the keys of LETHE_KEK_OLD to keys and returns the ring whose current key
// is s.ID.
func (s KEKSettings) withOld(keys map[string][]byte) (*KEK, error) {
	if old := strings.TrimSpace(s.Old); old != "" {
		for i, entry := range strings.Split(old, ",") {
			oid, enc, ok := strings.Cut(strings.TrimSpace(entry), ":")
			if !ok {
				return nil, fmt.Errorf("envelope: LETHE_KEK_OLD entry %d is not id:base64", i+1)
			}
			if _, dup := keys[oid]; dup {
				return nil, fmt.Errorf("envelope: LETHE_KEK_OLD: key id %q appears twice (or is the current id)", oid)
			}
			b, err := decodeKey(enc)
			if err != nil {
				return nil, fmt.Errorf("envelope: LETHE_KEK_OLD key %q: %w", oid, err)
			}
			keys[oid] = b
		}
	}
	return NewKEK(s.ID, keys)
}

// KEKFromEnv loads the KEKSettings from the environment and returns their ring.
func KEKFromEnv() (*KEK, error) {
	var s KEKSettings
	if err := envconf.FromEnv(&s); err != nil {
		return nil, err
	}
	return s.KEK()
}

// decodeKey decodes base64 (standard or URL alphabet, padded or not) of exactly KeySize
// bytes. Its errors never include s.
func decodeKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		b, err := enc.DecodeString(s)
		if err != nil {
			continue
		}
		if len(b) != KeySize {
			return nil, fmt.Errorf("key is %d bytes, need exactly %d (generate one with: head -c 32 /dev/urandom | base64)", len(b), KeySize)
		}
		return b, nil
	}
	return nil, errors.New("key is not base64")
}

func validKEKID(id string) error {
	if id == "" || len(id) > maxKEKIDLen {
		return fmt.Errorf("envelope: key-encryption key id must be 1-%d characters", maxKEKIDLen)
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("envelope: key-encryption key id %q may hold only A-Z, a-z, 0-9, '.', '_' and '-'", id)
		}
	}
	return nil
}

func strongKey(id string, key []byte) error {
	if len(key) != KeySize {
		return fmt.Errorf("envelope: key-encryption key %q is %d bytes, need exactly %d", id, len(key), KeySize)
	}
	for _, b := range key[1:] {
		if b != key[0] {
			return nil
		}
	}
	return fmt.Errorf("envelope: key-encryption key %q is one byte repeated: use 32 random bytes", id)
}

// CurrentID is the id of the key that wraps new data keys.
func (k *KEK) CurrentID() string { return k.current }

// IDs returns the ids of every key in the ring, sorted.
func (k *KEK) IDs() []string {
	ids := make([]string, 0, len(k.aeads))
	for id := range k.aeads {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// String masks the secrets.
func (k KEK) String() string {
	return fmt.Sprintf("kek(current=%s, ids=%v, ****)", k.current, (&k).IDs())
}

// GoString masks the secrets.
func (k KEK) GoString() string { return k.String() }

// Format prints String for every verb, so no verb can reach the ciphers' key schedules.
func (k KEK) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, k.String()) }

// wrap encrypts dek under the current key with AAD id. The result is
// version ‖ len(kek id) ‖ kek id ‖ nonce ‖ AES-256-GCM(dek).
func (k *KEK) wrap(id string, dek []byte) ([]byte, error) {
	aead := k.aeads[k.current]
	out := make([]byte, 0, 2+len(k.current)+aead.NonceSize()+len(dek)+aead.Overhead())
	out = append(out, wrapVersion, byte(len(k.current)))
	out = append(out, k.current...)
	nonce := out[len(out) : len(out)+aead.NonceSize()]
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("envelope: nonce: %w", err)
	}
	out = out[:len(out)+len(nonce)]
	return aead.Seal(out, nonce, dek, []byte(id)), nil
}

// wrappedKEKID returns the id of the key that wrapped w.
func wrappedKEKID(w []byte) (string, error) {
	if len(w) < 2 || w[0] != wrapVersion || len(w) < 2+int(w[1]) {
		return "", fmt.Errorf("%w: wrapped data key has an unknown format", ErrCorrupt)
	}
	return string(w[2 : 2+int(w[1])]), nil
}

// unwrap decrypts a wrapped data key of id with the key named in it.
func (k *KEK) unwrap(id string, w []byte) ([]byte, error) {
	kid, err := wrappedKEKID(w)
	if err != nil {
		return nil, err
	}
	aead, ok := k.aeads[kid]
	if !ok {
		return nil, fmt.Errorf("%w: the data key is wrapped by %q, which is not in the key ring %v (keep it in LETHE_KEK_OLD until every data key is rewrapped)",
			ErrUnknownKEK, kid, k.IDs())
	}
	rest := w[2+len(kid):]
	if len(rest) < aead.NonceSize()+aead.Overhead() {
		return nil, fmt.Errorf("%w: wrapped data key is truncated", ErrCorrupt)
	}
	dek, err := aead.Open(nil, rest[:aead.NonceSize()], rest[aead.NonceSize():], []byte(id))
	if err != nil {
		return nil, fmt.Errorf("%w: wrapped data key does not authenticate under %q for this id", ErrCorrupt, kid)
	}
	if len(dek) != KeySize {
		return nil, fmt.Errorf("%w: data key is %d bytes", ErrCorrupt, len(dek))
	}
	return dek, nil
}
