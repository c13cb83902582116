// Package envelope encrypts the raw identifiers of an erasure request under a data key of
// that request alone, so that destroying the key (crypto-shredding) makes every copy of
// them unreadable — the retained erasure.requested topic, its replicas and its backups
// included.
//
// Each request id has one data key: 32 random bytes, created on the first Seal, stored only
// wrapped (AES-256-GCM under the current key-encryption key, AAD = the request id, the KEK
// id written beside it) in a KeyStore. Payloads are sealed with AES-256-GCM under the data
// key with AAD = the request id, so a ciphertext copied under another request id does not
// open. Shred destroys the data key; the store keeps a tombstone with the time of the
// destruction, so a late or replayed Seal cannot create a new key for a shredded id, and
// Open fails with ErrShredded (a *ShreddedError saying when) forever. An id the store has
// neither a key nor a tombstone for fails with ErrMissing instead: its key was never stored
// there (a service reading another key store than the one that sealed) or was lost, which
// is a fault to report, never a sign that the request is complete.
//
// Unwrapped data keys are never cached: every Open reads the store once, so a shredded key
// is gone from every process at once. Seal costs one store write for a new id (one write
// and one read when the key already exists); Open costs one read, and OpenBatch one read
// for all its ids when the store is a BatchGetter.
//
// Key rotation: make the new key current and keep the old one in the ring (LETHE_KEK_OLD);
// data keys wrapped by the old key still open, new ones are wrapped by the new key. Rewrap
// moves a stored data key to the current KEK, RewrapAll every live key of a store that can
// list them (Lister), and Census counts the live keys per wrapping KEK: once it finds none
// wrapped by the old KEK, the old KEK can be dropped. Opening a data key whose KEK was dropped fails with
// ErrUnknownKEK naming the missing KEK id.
//
// Errors: ErrShredded, ErrMissing, ErrUnknownKEK and ErrCorrupt (tampered ciphertext, wrong id, wrong
// KEK) are returned marked retry.Permanent, since repeating cannot fix them; errors.Is
// still finds the sentinel. Key store errors keep the store's own classification. No error
// holds an id, a plaintext or a key.
package envelope

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/lethe-erasure/lethe/pkg/retry"
)

// Errors.
var (
	// ErrShredded means the data key of the id was destroyed: the store holds its
	// tombstone. Stores return it as a *ShreddedError, which says when.
	ErrShredded = errors.New("envelope: data key destroyed")
	// ErrMissing means the store holds neither a data key nor a tombstone for the id: the
	// key was never created in this store (a misconfigured key store) or it was lost.
	ErrMissing = errors.New("envelope: data key missing")
	// ErrExists means a data key is stored for the id already.
	ErrExists = errors.New("envelope: key already exists")
	// ErrConflict means the stored wrapped key changed between read and replace.
	ErrConflict = errors.New("envelope: wrapped key changed concurrently")
	// ErrUnknownKEK means the data key is wrapped by a KEK the ring does not hold.
	ErrUnknownKEK = errors.New("envelope: unknown key-encryption key")
	// ErrCorrupt means a sealed payload or wrapped key is malformed or does not
	// authenticate: tampered, moved to another id, or wrapped by another key.
	ErrCorrupt = errors.New("envelope: authentication failed")
)

// ShreddedError is the error of an id whose data key was destroyed. errors.Is(err,
// ErrShredded) holds for it. At is the time of the destruction as the store recorded it,
// zero for tombstones written before stores recorded it.
type ShreddedError struct {
	At time.Time
}

// Shredded returns the error of an id destroyed at at.
func Shredded(at time.Time) error { return &ShreddedError{At: at} }

func (e *ShreddedError) Error() string {
	if e.At.IsZero() {
		return ErrShredded.Error()
	}
	return ErrShredded.Error() + " at " + e.At.UTC().Format(time.RFC3339)
}

// Is makes errors.Is(err, ErrShredded) hold.
func (e *ShreddedError) Is(target error) bool { return target == ErrShredded }

// ShreddedAt returns when the data key err reports destroyed was destroyed, and whether
// err reports a destroyed key at all (the time is zero when the store recorded none).
func ShreddedAt(err error) (time.Time, bool) {
	var se *ShreddedError
	if errors.As(err, &se) {
		return se.At, true
	}
	return time.Time{}, errors.Is(err, ErrShredded)
}

// MaxIDLen is the longest id accepted, in bytes.
const MaxIDLen = 1024

// KeyStore keeps wrapped per-request data keys. Implementations are safe for concurrent
// use, durable once a call returns nil, and return copies the caller may keep.
type KeyStore interface {
	// Create stores wrapped under id: ErrExists if a key is stored, ErrShredded if the id
	// was destroyed. Of concurrent Creates of one id exactly one succeeds.
	Create(ctx context.Context, id string, wrapped []byte) error
	// Get returns the wrapped key of id: a *ShreddedError (ErrShredded) if it was
	// destroyed, ErrMissing if the store holds neither a key nor a tombstone for id.
	Get(ctx context.Context, id string) ([]byte, error)
	// Destroy removes the key of id and leaves a tombstone holding the time of the first
	// Destroy, so that afterwards Get and Create return a *ShreddedError with that time
	// forever. It is idempotent and also tombstones an id that never had a key.
	Destroy(ctx context.Context, id string) error
}

// Replacer is an optional KeyStore capability that Rewrap needs.
type Replacer interface {
	// Replace stores wrapped for id if the stored key equals old: ErrConflict if another
	// key is stored, ErrShredded if the id was destroyed (never resurrecting it) and
	// ErrMissing if it is absent.
	Replace(ctx context.Context, id string, old, wrapped []byte) error
}

// Lister is an optional KeyStore capability that RewrapAll and Census need.
type Lister interface {
	// Live yields the id of every stored data key that is not destroyed (a damaged key
	// included, so that it is reported rather than skipped), in no particular order. An
	// id stored for the whole iteration is yielded exactly once; one created or destroyed
	// meanwhile may or may not be. On an error Live yields it with an empty id and stops.
	Live(ctx context.Context) iter.Seq2[string, error]
}

// BatchGetter is an optional KeyStore capability that OpenBatch uses to read many keys in
// few calls.
type BatchGetter interface {
	// GetBatch returns at each index of ids what Get returns for that id: its wrapped key,
	// or its error (a *ShreddedError, ErrMissing, or the failure of the read). ids may
	// repeat; each index gets its own copy.
	GetBatch(ctx context.Context, ids []string) ([][]byte, []error)
}

// Sealed is an encrypted payload: the id of the KEK that was current when it was sealed
// (informational: Open unwraps with the KEK named in the stored wrapped key, so a Rewrap
// does not invalidate sealed payloads), the GCM nonce and the ciphertext with its tag.
type Sealed struct {
	KEKID      string
	Nonce      []byte
	Ciphertext []byte
}

// Sealer seals and opens payloads under per-id data keys. Both fields are required. A
// Sealer is safe for concurrent use and holds no key material besides KEK.
type Sealer struct {
	KEK  *KEK
	Keys KeyStore
}

// Seal encrypts plaintext under the data key of id, creating the key on first use and
// reusing it afterwards, so a re-drive of the same request seals under the same key. Of
// concurrent Seals of a new id one creates the key and the others use it. Seal returns
// ErrShredded when the key of id was destroyed.
func (s *Sealer) Seal(ctx context.Context, id string, plaintext []byte) (Sealed, error) {
	if err := validID(id); err != nil {
		return Sealed{}, err
	}
	dek, err := s.dataKey(ctx, id)
	if err != nil {
		return Sealed{}, err
	}
	aead, err := gcm(dek)
	clear(dek)
	if err != nil {
		return Sealed{}, err
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return Sealed{}, fmt.Errorf("envelope: nonce: %w", err)
	}
	return Sealed{KEKID: s.KEK.current, Nonce: nonce, Ciphertext: aead.Seal(nil, nonce, plaintext, []byte(id))}, nil
}

// dataKey returns the unwrapped data key of id, creating it if none is stored.
func (s *Sealer) dataKey(ctx context.Context, id string) ([]byte, error) {
	dek := make([]byte, KeySize)
	if _, err := rand.Read(dek); err != nil {
		return nil, fmt.Errorf("envelope: data key: %w", err)
	}
	w, err := s.KEK.wrap(id, dek)
	if err != nil {
		return nil, err
	}
	err = s.Keys.Create(ctx, id, w)
	switch {
	case err == nil:
		return dek, nil
	case errors.Is(err, ErrExists):
		clear(dek)
		return s.storedKey(ctx, id)
	case errors.Is(err, ErrShredded):
		return nil, retry.Permanent(err)
	default:
		return nil, fmt.Errorf("envelope: create data key: %w", err)
	}
}

// storedKey reads and unwraps the data key of id.
func (s *Sealer) storedKey(ctx context.Context, id string) ([]byte, error) {
	w, err := s.Keys.Get(ctx, id)
	return s.unwrapStored(id, w, err)
}

// unwrapStored unwraps w, the wrapped key of id that the store returned with err.
func (s *Sealer) unwrapStored(id string, w []byte, err error) ([]byte, error) {
	if errors.Is(err, ErrShredded) || errors.Is(err, ErrMissing) {
		return nil, retry.Permanent(err)
	}
	if err != nil {
		return nil, fmt.Errorf("envelope: get data key: %w", err)
	}
	dek, err := s.KEK.unwrap(id, w)
	if err != nil {
		return nil, retry.Permanent(err)
	}
	return dek, nil
}

// Open decrypts sealed, which must have been sealed for id. It returns ErrShredded (a
// *ShreddedError) once the data key of id was destroyed, ErrMissing when the store holds
// neither its key nor its tombstone, ErrCorrupt if sealed was altered or sealed for another id,
// and ErrUnknownKEK if the KEK that wrapped the data key is no longer in the ring.
func (s *Sealer) Open(ctx context.Context, id string, sealed Sealed) ([]byte, error) {
	if err := validID(id); err != nil {
		return nil, err
	}
	dek, err := s.storedKey(ctx, id)
	if err != nil {
		return nil, err
	}
	return decrypt(id, dek, sealed)
}

// OpenBatch opens sealed[i], sealed for ids[i], as Open does, and returns the outcome of
// each at its index. It reads the data keys of all of them in one GetBatch when the store
// is a BatchGetter and there are several; otherwise it reads each as Open does. ids and
// sealed have the same length.
func (s *Sealer) OpenBatch(ctx context.Context, ids []string, sealed []Sealed) ([][]byte, []error) {
	pts, errs := make([][]byte, len(ids)), make([]error, len(ids))
	var read []int // the indices of valid ids
	for i, id := range ids {
		if errs[i] = validID(id); errs[i] == nil {
			read = append(read, i)
		}
	}
	bg, ok := s.Keys.(BatchGetter)
	if !ok || len(read) < 2 {
		for _, i := range read {
			pts[i], errs[i] = s.Open(ctx, ids[i], sealed[i])
		}
		return pts, errs
	}
	valid := make([]string, len(read))
	for j, i := range read {
		valid[j] = ids[i]
	}
	ws, werrs := bg.GetBatch(ctx, valid)
	if len(ws) != len(valid) || len(werrs) != len(valid) {
		err := fmt.Errorf("envelope: get data keys: the store answered %d of %d ids", len(ws), len(valid))
		for _, i := range read {
			errs[i] = err
		}
		return pts, errs
	}
	for j, i := range read {
		dek, err := s.unwrapStored(ids[i], ws[j], werrs[j])
		if err != nil {
			errs[i] = err
			continue
		}
		pts[i], errs[i] = decrypt(ids[i], dek, sealed[i])
	}
	return pts, errs
}

// decrypt opens sealed, sealed for id, with dek, and clears dek.
func decrypt(id string, dek []byte, sealed Sealed) ([]byte, error) {
	aead, err := gcm(dek)
	clear(dek)
	if err != nil {
		return nil, err
	}
	if len(sealed.Nonce) != aead.NonceSize() {
		return nil, retry.Permanent(fmt.Errorf("%w: nonce is %d bytes", ErrCorrupt, len(sealed.Nonce)))
	}
	pt, err := aead.Open(nil, sealed.Nonce, sealed.Ciphertext, []byte(id))
	if err != nil {
		return nil, retry.Permanent(fmt.Errorf("%w: sealed payload does not authenticate for this id", ErrCorrupt))
	}
	return pt, nil
}

// Shred destroys the data key of id, so that no payload sealed for id opens again, in this
// process or any other. It is idempotent.
func (s *Sealer) Shred(ctx context.Context, id string) error {
	if err := validID(id); err != nil {
		return err
	}
	if err := s.Keys.Destroy(ctx, id); err != nil {
		return fmt.Errorf("envelope: destroy data key: %w", err)
	}
	return nil
}

// Rewrap re-wraps the stored data key of id under the current KEK, so that the KEK that
// wrapped it can be dropped. It reports whether the key changed: false when it was wrapped
// by the current KEK already. The store must implement Replacer. A key shredded meanwhile
// stays shredded (ErrShredded); an id without a key fails with ErrMissing.
func (s *Sealer) Rewrap(ctx context.Context, id string) (bool, error) {
	if err := validID(id); err != nil {
		return false, err
	}
	r, ok := s.Keys.(Replacer)
	if !ok {
		return false, retry.Permanent(fmt.Errorf("envelope: key store %T cannot replace keys", s.Keys))
	}
	for attempt := 0; ; attempt++ {
		old, err := s.Keys.Get(ctx, id)
		if errors.Is(err, ErrShredded) || errors.Is(err, ErrMissing) {
			return false, retry.Permanent(err)
		}
		if err != nil {
			return false, fmt.Errorf("envelope: get data key: %w", err)
		}
		if kid, err := wrappedKEKID(old); err == nil && kid == s.KEK.current {
			return false, nil
		}
		dek, err := s.KEK.unwrap(id, old)
		if err != nil {
			return false, retry.Permanent(err)
		}
		w, err := s.KEK.wrap(id, dek)
		clear(dek)
		if err != nil {
			return false, err
		}
		err = r.Replace(ctx, id, old, w)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, ErrShredded) || errors.Is(err, ErrMissing):
			return false, retry.Permanent(err)
		case errors.Is(err, ErrConflict) && attempt < 3:
			continue // rewrapped concurrently: read again
		default:
			return false, fmt.Errorf("envelope: replace data key: %w", err)
		}
	}
}

func gcm(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("envelope: cipher: %w", err)
	}
	return cipher.NewGCM(block)
}

func validID(id string) error {
	if id == "" || len(id) > MaxIDLen {
		return retry.Permanent(fmt.Errorf("envelope: id must be 1-%d bytes", MaxIDLen))
	}
	return nil
}
