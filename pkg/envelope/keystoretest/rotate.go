package keystoretest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/envelope"
)

func testLive(t *testing.T, s envelope.KeyStore) {
	l, ok := s.(envelope.Lister)
	if !ok {
		t.Logf("%T does not implement envelope.Lister; Sealer.RewrapAll will refuse it", s)
		return
	}
	ctx := t.Context()
	if got := live(t, l); len(got) != 0 {
		t.Fatalf("Live of an empty store = %q, want nothing", got)
	}
	want := map[string]bool{}
	for i, id := range IDs {
		mustCreate(t, s, id, fmt.Appendf(nil, "key-%d", i))
		want[id] = true
	}
	for _, id := range []string{"a", "*", "never-had-a-key"} {
		if err := s.Destroy(ctx, id); err != nil {
			t.Fatal(err)
		}
		delete(want, id)
	}
	if r, ok := s.(envelope.Replacer); ok {
		if err := r.Replace(ctx, "ab", []byte("key-1"), []byte("key-1b")); err != nil {
			t.Fatal(err)
		}
	}
	got := live(t, l)
	if !slices.Equal(got, slices.Sorted(maps.Keys(want))) {
		t.Fatalf("Live = %q\nwant %q (every id with a key, once; no tombstone)", got, slices.Sorted(maps.Keys(want)))
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	var lerr error
	for _, err := range l.Live(cctx) {
		if err != nil {
			lerr = err
			break
		}
	}
	if lerr == nil {
		t.Fatal("Live with a cancelled context yielded no error")
	}
}

// live returns the ids l yields, sorted, failing on an error.
func live(t *testing.T, l envelope.Lister) []string {
	t.Helper()
	var ids []string
	for id, err := range l.Live(t.Context()) {
		if err != nil {
			t.Fatalf("Live: %v", err)
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// hookStore passes every call to its store and calls onGet after each Get, to interleave
// a change between a read and the write that follows it.
type hookStore struct {
	envelope.KeyStore
	onGet func(id string)
}

func (h *hookStore) Get(ctx context.Context, id string) ([]byte, error) {
	w, err := h.KeyStore.Get(ctx, id)
	if h.onGet != nil {
		h.onGet(id)
	}
	return w, err
}

func (h *hookStore) Replace(ctx context.Context, id string, old, wrapped []byte) error {
	return h.KeyStore.(envelope.Replacer).Replace(ctx, id, old, wrapped)
}

func (h *hookStore) Live(ctx context.Context) iter.Seq2[string, error] {
	return h.KeyStore.(envelope.Lister).Live(ctx)
}

func testRewrapAll(t *testing.T, s envelope.KeyStore) { RunRewrap(t, s, secret) }

// RunRewrap is the suite's KEK rotation on s with key-encryption keys from newKEK (random
// bytes in Run; a key source such as KMS in its own test): data keys sealed under one KEK
// open under the next alone after RewrapAll, shredded keys stay shredded, a shred racing
// the rewrap is not undone, a second run changes nothing.
func RunRewrap(t *testing.T, s envelope.KeyStore, newKEK func(t *testing.T) []byte) {
	secret := newKEK
	_, replaces := s.(envelope.Replacer)
	if _, lists := s.(envelope.Lister); !replaces || !lists {
		t.Logf("%T does not implement envelope.Replacer and envelope.Lister; Sealer.RewrapAll will refuse it", s)
		return
	}
	ctx := t.Context()
	k0, k1, k2 := secret(t), secret(t), secret(t)
	store := &hookStore{KeyStore: s}
	sealer := func(current string, keys map[string][]byte) *envelope.Sealer {
		kek, err := envelope.NewKEK(current, keys)
		if err != nil {
			t.Fatal(err)
		}
		return &envelope.Sealer{KEK: kek, Keys: store}
	}
	before := sealer("kek1", map[string][]byte{"kek1": k1})
	sealed := map[string]envelope.Sealed{}
	sealAs := func(sl *envelope.Sealer, id string) {
		t.Helper()
		b, err := sl.Seal(ctx, id, []byte("payload of "+id))
		if err != nil {
			t.Fatalf("Seal: %v", err)
		}
		sealed[id] = b
	}
	var ids []string
	for i := range 30 {
		ids = append(ids, fmt.Sprintf("er_%02d", i))
	}
	ids = append(ids, IDs...)
	for _, id := range ids {
		sealAs(before, id)
	}
	shredded := map[string]bool{}
	for _, id := range ids[:3] { // shredded before the rotation
		if err := before.Shred(ctx, id); err != nil {
			t.Fatal(err)
		}
		shredded[id] = true
	}

	rotated := sealer("kek2", map[string][]byte{"kek2": k2, "kek1": k1})
	sealAs(rotated, "er_new_1")
	sealAs(rotated, "er_new_2")
	census, err := rotated.Census(ctx, envelope.BulkOptions{Workers: 3})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]int{"kek1": len(ids) - 3, "kek2": 2}; !maps.Equal(census.ByKEK, want) || census.Unreadable != 0 {
		t.Fatalf("Census before rewrap = %+v, want by KEK %v", census, want)
	}

	// A shred between the rewrap's read and its write (victim), and shreds racing it.
	victim, racing := ids[3], ids[4:9]
	var once sync.Once
	store.onGet = func(id string) {
		if id == victim {
			once.Do(func() {
				if err := s.Destroy(ctx, victim); err != nil {
					t.Error(err)
				}
			})
		}
	}
	shredded[victim] = true
	var wg sync.WaitGroup
	wg.Go(func() {
		for _, id := range racing {
			if err := rotated.Shred(ctx, id); err != nil {
				t.Error(err)
			}
		}
	})
	for _, id := range racing {
		shredded[id] = true
	}
	got, err := rotated.RewrapAll(ctx, envelope.BulkOptions{Workers: 4})
	wg.Wait()
	store.onGet = nil
	if err != nil {
		t.Fatalf("RewrapAll: %v", err)
	}
	liveBefore := len(ids) - 3
	if got.Failed != 0 || got.AlreadyCurrent != 2 || got.Shredded < 1 ||
		got.Rewrapped+got.Shredded < liveBefore-len(racing) || got.Rewrapped+got.Shredded > liveBefore {
		t.Fatalf("RewrapAll = %+v; want no failure, 2 already current, the victim shredded meanwhile, and %d-%d rewrapped or shredded",
			got, liveBefore-len(racing), liveBefore)
	}
	again, err := rotated.RewrapAll(ctx, envelope.BulkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := (envelope.RewrapCounts{AlreadyCurrent: len(ids) + 2 - len(shredded)}); !equalCounts(again, want) {
		t.Fatalf("second RewrapAll = %+v, want %+v (nothing new to do)", again, want)
	}
	census, err = rotated.Census(ctx, envelope.BulkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if census.Other("kek2") != 0 || census.ByKEK["kek2"] != len(ids)+2-len(shredded) {
		t.Fatalf("Census after rewrap = %+v, want every live key under kek2", census)
	}

	// kek1 removed from the ring: every live key opens, every shredded key stays shredded.
	after := sealer("kek2", map[string][]byte{"kek2": k2})
	for id, b := range sealed {
		pt, err := after.Open(ctx, id, b)
		switch {
		case shredded[id]:
			if !errors.Is(err, envelope.ErrShredded) {
				t.Errorf("Open of shredded id %q after rewrap = %q, %v; want ErrShredded", id, pt, err)
			}
			if _, err := s.Get(ctx, id); !errors.Is(err, envelope.ErrShredded) {
				t.Errorf("Get of shredded id %q after rewrap = %v, want ErrShredded (resurrected)", id, err)
			}
		case err != nil || string(pt) != "payload of "+id:
			t.Errorf("Open of %q with kek1 dropped = %q, %v", id, pt, err)
		}
	}

	// A key wrapped by a KEK the ring lacks fails by reason and stays counted under it.
	orphan := sealer("kek0", map[string][]byte{"kek0": k0})
	sealAs(orphan, "er_orphan")
	got, err = after.RewrapAll(ctx, envelope.BulkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Failed != 1 || got.FailedBy["unknown_kek"] != 1 || got.Rewrapped != 0 {
		t.Fatalf("RewrapAll with a key under a KEK not in the ring = %+v, want 1 failed as unknown_kek", got)
	}
	census, err = after.Census(ctx, envelope.BulkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if census.ByKEK["kek0"] != 1 || census.Other("kek2") != 1 {
		t.Fatalf("Census = %+v, want the orphan counted under kek0", census)
	}
}

func equalCounts(a, b envelope.RewrapCounts) bool {
	return a.Rewrapped == b.Rewrapped && a.AlreadyCurrent == b.AlreadyCurrent && a.Shredded == b.Shredded &&
		a.Failed == b.Failed && len(a.FailedBy) == len(b.FailedBy) && a.FirstError == b.FirstError
}

func secret(t *testing.T) []byte {
	t.Helper()
	b := make([]byte, envelope.KeySize)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}
