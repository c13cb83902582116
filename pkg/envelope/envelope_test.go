package envelope_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/envelope"
	"github.com/lethe-erasure/lethe/pkg/retry"
)

func randKey(t testing.TB) []byte {
	t.Helper()
	k := make([]byte, envelope.KeySize)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return k
}

func ring(t testing.TB, current string, keys map[string][]byte) *envelope.KEK {
	t.Helper()
	k, err := envelope.NewKEK(current, keys)
	if err != nil {
		t.Fatalf("NewKEK: %v", err)
	}
	return k
}

func dirStore(t testing.TB) *envelope.DirKeyStore {
	t.Helper()
	s, err := envelope.NewDirKeyStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newSealer(t testing.TB) *envelope.Sealer {
	t.Helper()
	return &envelope.Sealer{KEK: ring(t, "k1", map[string][]byte{"k1": randKey(t)}), Keys: dirStore(t)}
}

func seal(t *testing.T, s *envelope.Sealer, id, pt string) envelope.Sealed {
	t.Helper()
	sealed, err := s.Seal(t.Context(), id, []byte(pt))
	if err != nil {
		t.Fatalf("Seal(%s): %v", id, err)
	}
	return sealed
}

func open(t *testing.T, s *envelope.Sealer, id string, sealed envelope.Sealed, want string) {
	t.Helper()
	got, err := s.Open(t.Context(), id, sealed)
	if err != nil || string(got) != want {
		t.Fatalf("Open(%s) = %q, %v; want %q", id, got, err, want)
	}
}

func TestSealOpenRoundTrip(t *testing.T) {
	s := newSealer(t)
	pt := `{"subject_id":"cust-42","sessions":["s1","s2"],"email":"ana@example.com"}`
	sealed := seal(t, s, "er_1", pt)
	if sealed.KEKID != "k1" || len(sealed.Nonce) != 12 || len(sealed.Ciphertext) != len(pt)+16 {
		t.Fatalf("Sealed = kek %q, nonce %d bytes, ciphertext %d bytes", sealed.KEKID, len(sealed.Nonce), len(sealed.Ciphertext))
	}
	if bytes.Contains(sealed.Ciphertext, []byte("cust-42")) {
		t.Fatal("ciphertext holds the plaintext")
	}
	open(t, s, "er_1", sealed, pt)
	empty := seal(t, s, "er_1", "")
	open(t, s, "er_1", empty, "")

	b, err := sealed.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var back envelope.Sealed
	if err := back.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	open(t, s, "er_1", back, pt)
	for _, bad := range [][]byte{nil, {2, 0, 0}, b[:2], {1, 5, 'k'}} {
		if err := back.UnmarshalBinary(bad); !errors.Is(err, envelope.ErrCorrupt) {
			t.Fatalf("UnmarshalBinary(%x) = %v, want ErrCorrupt", bad, err)
		}
	}
}

func TestShred(t *testing.T) {
	ctx := t.Context()
	s := newSealer(t)
	a, b := seal(t, s, "er_a", "alice"), seal(t, s, "er_b", "bob")
	for range 2 {
		if err := s.Shred(ctx, "er_a"); err != nil {
			t.Fatalf("Shred: %v", err)
		}
	}
	_, err := s.Open(ctx, "er_a", a)
	if !errors.Is(err, envelope.ErrShredded) || !retry.IsPermanent(err) {
		t.Fatalf("Open after Shred = %v, want permanent ErrShredded", err)
	}
	// A replayed request must not get a new key for a shredded id.
	if _, err := s.Seal(ctx, "er_a", []byte("alice")); !errors.Is(err, envelope.ErrShredded) {
		t.Fatalf("Seal after Shred = %v, want ErrShredded", err)
	}
	if _, err := s.Keys.Get(ctx, "er_a"); !errors.Is(err, envelope.ErrShredded) {
		t.Fatalf("store Get after Shred = %v, want ErrShredded", err)
	}
	open(t, s, "er_b", b, "bob")
	// Shredding an id that never had a key tombstones it too.
	if err := s.Shred(ctx, "er_never"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Seal(ctx, "er_never", []byte("x")); !errors.Is(err, envelope.ErrShredded) {
		t.Fatalf("Seal after Shred of an unused id = %v, want ErrShredded", err)
	}
	if _, err := s.Open(ctx, "er_unknown", b); !errors.Is(err, envelope.ErrMissing) || errors.Is(err, envelope.ErrShredded) || !retry.IsPermanent(err) {
		t.Fatalf("Open of an id without a key or tombstone = %v, want permanent ErrMissing, not ErrShredded", err)
	}
}

// countingStore counts calls on the KeyStore it wraps.
type countingStore struct {
	envelope.KeyStore
	creates, created, gets atomic.Int64
}

func (c *countingStore) Create(ctx context.Context, id string, w []byte) error {
	c.creates.Add(1)
	err := c.KeyStore.Create(ctx, id, w)
	if err == nil {
		c.created.Add(1)
	}
	return err
}

func (c *countingStore) Get(ctx context.Context, id string) ([]byte, error) {
	c.gets.Add(1)
	return c.KeyStore.Get(ctx, id)
}

func TestResealReusesKeyAndCostsOneCallEach(t *testing.T) {
	ctx := t.Context()
	cs := &countingStore{KeyStore: dirStore(t)}
	s := &envelope.Sealer{KEK: ring(t, "k1", map[string][]byte{"k1": randKey(t)}), Keys: cs}
	first := seal(t, s, "er_1", "one")
	if cs.creates.Load() != 1 || cs.gets.Load() != 0 {
		t.Fatalf("first Seal: %d creates, %d gets; want 1, 0", cs.creates.Load(), cs.gets.Load())
	}
	w1, err := cs.KeyStore.Get(ctx, "er_1")
	if err != nil {
		t.Fatal(err)
	}
	second := seal(t, s, "er_1", "two")
	w2, _ := cs.KeyStore.Get(ctx, "er_1")
	if !bytes.Equal(w1, w2) || cs.created.Load() != 1 {
		t.Fatalf("re-Seal replaced the data key (%d keys created)", cs.created.Load())
	}
	if bytes.Equal(first.Nonce, second.Nonce) {
		t.Fatal("two Seals under one key reused a nonce")
	}
	gets := cs.gets.Load()
	open(t, s, "er_1", first, "one")
	open(t, s, "er_1", second, "two")
	if n := cs.gets.Load() - gets; n != 2 {
		t.Fatalf("two Opens made %d store reads, want 2", n)
	}
}

func TestWrongIDOrTamperingFails(t *testing.T) {
	ctx := t.Context()
	s := newSealer(t)
	sealed := seal(t, s, "er_a", "alice")
	seal(t, s, "er_b", "bob")
	flip := func(b []byte, i int) []byte { c := bytes.Clone(b); c[i] ^= 1; return c }
	for _, tc := range []struct {
		name   string
		id     string
		sealed envelope.Sealed
	}{
		{"moved to another id", "er_b", sealed},
		{"ciphertext byte", "er_a", envelope.Sealed{KEKID: "k1", Nonce: sealed.Nonce, Ciphertext: flip(sealed.Ciphertext, 0)}},
		{"tag byte", "er_a", envelope.Sealed{KEKID: "k1", Nonce: sealed.Nonce, Ciphertext: flip(sealed.Ciphertext, len(sealed.Ciphertext)-1)}},
		{"nonce byte", "er_a", envelope.Sealed{KEKID: "k1", Nonce: flip(sealed.Nonce, 3), Ciphertext: sealed.Ciphertext}},
		{"truncated", "er_a", envelope.Sealed{KEKID: "k1", Nonce: sealed.Nonce, Ciphertext: sealed.Ciphertext[:10]}},
		{"short nonce", "er_a", envelope.Sealed{KEKID: "k1", Nonce: sealed.Nonce[:8], Ciphertext: sealed.Ciphertext}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pt, err := s.Open(ctx, tc.id, tc.sealed)
			if !errors.Is(err, envelope.ErrCorrupt) || !retry.IsPermanent(err) || pt != nil {
				t.Fatalf("Open = %q, %v; want permanent ErrCorrupt", pt, err)
			}
			if strings.Contains(err.Error(), tc.id) {
				t.Fatalf("error names the id: %v", err)
			}
		})
	}
	open(t, s, "er_a", sealed, "alice")

	// A wrapped key swapped between ids, or unwrapped by another KEK with the same id, fails.
	ks := s.Keys.(*envelope.DirKeyStore)
	wb, _ := ks.Get(ctx, "er_b")
	wa, _ := ks.Get(ctx, "er_a")
	if err := ks.Replace(ctx, "er_a", wa, wb); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Open(ctx, "er_a", sealed); !errors.Is(err, envelope.ErrCorrupt) || !strings.Contains(err.Error(), "wrapped data key") {
		t.Fatalf("Open with another id's wrapped key = %v, want ErrCorrupt from unwrapping (the wrap binds the id)", err)
	}
	other := &envelope.Sealer{KEK: ring(t, "k1", map[string][]byte{"k1": randKey(t)}), Keys: ks}
	if _, err := other.Open(ctx, "er_b", sealed); !errors.Is(err, envelope.ErrCorrupt) {
		t.Fatalf("Open under a different KEK with the same id = %v, want ErrCorrupt", err)
	}
}

func TestRotation(t *testing.T) {
	ctx := t.Context()
	keys := dirStore(t)
	k1, k2 := randKey(t), randKey(t)
	before := &envelope.Sealer{KEK: ring(t, "k1", map[string][]byte{"k1": k1}), Keys: keys}
	s1 := seal(t, before, "er_1", "one")
	s2 := seal(t, before, "er_2", "two")

	rotated := &envelope.Sealer{KEK: ring(t, "k2", map[string][]byte{"k2": k2, "k1": k1}), Keys: keys}
	open(t, rotated, "er_1", s1, "one")
	open(t, rotated, "er_2", s2, "two")
	s3 := seal(t, rotated, "er_3", "three")
	if s3.KEKID != "k2" {
		t.Fatalf("new seal names KEK %q, want k2", s3.KEKID)
	}
	for _, want := range []bool{true, false} {
		changed, err := rotated.Rewrap(ctx, "er_1")
		if err != nil || changed != want {
			t.Fatalf("Rewrap = %v, %v; want %v", changed, err, want)
		}
	}
	if changed, err := rotated.Rewrap(ctx, "er_3"); err != nil || changed {
		t.Fatalf("Rewrap of a key wrapped by the current KEK = %v, %v; want false", changed, err)
	}

	dropped := &envelope.Sealer{KEK: ring(t, "k2", map[string][]byte{"k2": k2}), Keys: keys}
	open(t, dropped, "er_1", s1, "one") // rewrapped: the old Sealed still opens
	open(t, dropped, "er_3", s3, "three")
	_, err := dropped.Open(ctx, "er_2", s2)
	if !errors.Is(err, envelope.ErrUnknownKEK) || !retry.IsPermanent(err) || !strings.Contains(err.Error(), `"k1"`) {
		t.Fatalf("Open of a key wrapped by a dropped KEK = %v, want permanent ErrUnknownKEK naming k1", err)
	}

	if err := rotated.Shred(ctx, "er_2"); err != nil {
		t.Fatal(err)
	}
	if _, err := rotated.Rewrap(ctx, "er_2"); !errors.Is(err, envelope.ErrShredded) {
		t.Fatalf("Rewrap of a shredded key = %v, want ErrShredded", err)
	}
	noReplace := &envelope.Sealer{KEK: rotated.KEK, Keys: &countingStore{KeyStore: keys}}
	if _, err := noReplace.Rewrap(ctx, "er_1"); err == nil {
		t.Fatal("Rewrap on a store without Replace succeeded")
	}
}

func TestConcurrentSealOneKey(t *testing.T) {
	cs := &countingStore{KeyStore: dirStore(t)}
	s := &envelope.Sealer{KEK: ring(t, "k1", map[string][]byte{"k1": randKey(t)}), Keys: cs}
	const n = 8
	sealed := make([]envelope.Sealed, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { sealed[i], errs[i] = s.Seal(t.Context(), "er_race", fmt.Appendf(nil, "payload-%d", i)) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Seal %d: %v", i, err)
		}
	}
	if got := cs.created.Load(); got != 1 {
		t.Fatalf("%d data keys created, want 1", got)
	}
	// Another Sealer on the same store opens every payload: they share the one stored key.
	reader := &envelope.Sealer{KEK: s.KEK, Keys: cs.KeyStore}
	for i := range n {
		open(t, reader, "er_race", sealed[i], fmt.Sprintf("payload-%d", i))
	}
}

func TestInvalidID(t *testing.T) {
	s := newSealer(t)
	for _, id := range []string{"", strings.Repeat("x", envelope.MaxIDLen+1)} {
		if _, err := s.Seal(t.Context(), id, []byte("x")); err == nil || !retry.IsPermanent(err) {
			t.Fatalf("Seal with a %d-byte id = %v, want a permanent error", len(id), err)
		}
	}
}

// BenchmarkSealOpen measures one request's cost on the directory store: Seal creates and
// stores a new data key (fsynced), Open reads it back.
func BenchmarkSealOpen(b *testing.B) {
	s := newSealer(b)
	ctx := context.Background()
	pt := []byte(`{"subject_id":"cust-42","sessions":["s1","s2"],"email":"ana@example.com"}`)
	i := 0
	for b.Loop() {
		i++
		id := fmt.Sprintf("er_%d", i)
		sealed, err := s.Seal(ctx, id, pt)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Open(ctx, id, sealed); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOpen measures Open alone: one store read, one unwrap, one decryption.
func BenchmarkOpen(b *testing.B) {
	s := newSealer(b)
	ctx := context.Background()
	sealed, err := s.Seal(ctx, "er_1", []byte(`{"subject_id":"cust-42"}`))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := s.Open(ctx, "er_1", sealed); err != nil {
			b.Fatal(err)
		}
	}
}
