// Package keystoretest is the conformance suite every envelope.KeyStore passes.
//
// Run checks the KeyStore contract against a real backend: create, exclusive create, get,
// an absent id reported missing (never shredded), destroy and its tombstone with the time
// of the first destroy (a later Create must not resurrect a key), idempotent destroy,
// ids that must not collide, concurrent creates and destroys, returned copies, cancelled
// contexts, and, when the store implements envelope.Replacer, compare-and-replace; when it
// also implements envelope.Lister, listing the live keys and a KEK rotation by RewrapAll
// (keys sealed under one KEK open under the next alone, shredded keys stay shredded, a
// shred racing the rewrap is not undone, a second run changes nothing); when it implements
// envelope.BatchGetter, reading keys, tombstones, absent, repeated and invalid ids in one
// GetBatch of more than 100 ids, each answered as Get answers it.
package keystoretest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lethe-erasure/lethe/pkg/envelope"
)

// IDs are ids that a store must keep apart: prefixes, delimiters, path syntax, glob and
// escape characters, Unicode spellings and a long id.
var IDs = []string{
	"a", "ab", "A", "a b", "x:y", "x#y", "a/b", "../a", ".", "..", "*", "a?", "[ab]", `a\`,
	"%2F", "é", "e\u0301", "er_6ebc4c5fc7aee916243a000c4fb91673", strings.Repeat("z", 300),
}

// Run runs the suite. newStore returns an empty store; subtests run in parallel, each on
// its own store.
func Run(t *testing.T, newStore func(t *testing.T) envelope.KeyStore) {
	t.Helper()
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, s envelope.KeyStore)
	}{
		{"CreateGet", testCreateGet},
		{"CreateExclusive", testCreateExclusive},
		{"GetAbsent", testGetAbsent},
		{"DestroyTombstone", testDestroyTombstone},
		{"DestroyAbsent", testDestroyAbsent},
		{"DistinctIDs", testDistinctIDs},
		{"ConcurrentCreate", testConcurrentCreate},
		{"ConcurrentCreateDestroy", testConcurrentCreateDestroy},
		{"CancelledContext", testCancelled},
		{"Replace", testReplace},
		{"Live", testLive},
		{"RewrapAll", testRewrapAll},
		{"GetBatch", testGetBatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newStore(t))
		})
	}
}

func testCreateGet(t *testing.T, s envelope.KeyStore) {
	ctx := t.Context()
	w := []byte("wrapped-key-0\x00\xff")
	if err := s.Create(ctx, "er_1", w); err != nil {
		t.Fatalf("Create: %v", err)
	}
	got, err := s.Get(ctx, "er_1")
	if err != nil || !bytes.Equal(got, w) {
		t.Fatalf("Get = %q, %v; want %q", got, err, w)
	}
	got[0] ^= 0xff
	w[1] ^= 0xff
	again, err := s.Get(ctx, "er_1")
	if err != nil || !bytes.Equal(again, []byte("wrapped-key-0\x00\xff")) {
		t.Fatalf("Get after mutating returned and passed slices = %q, %v: store must keep its own copy", again, err)
	}
}

func testCreateExclusive(t *testing.T, s envelope.KeyStore) {
	ctx := t.Context()
	mustCreate(t, s, "er_1", []byte("first"))
	if err := s.Create(ctx, "er_1", []byte("second")); !errors.Is(err, envelope.ErrExists) {
		t.Fatalf("second Create = %v, want ErrExists", err)
	}
	mustGet(t, s, "er_1", []byte("first"))
}

func testGetAbsent(t *testing.T, s envelope.KeyStore) {
	got, err := s.Get(t.Context(), "never")
	if !errors.Is(err, envelope.ErrMissing) || errors.Is(err, envelope.ErrShredded) {
		t.Fatalf("Get of an id never stored = %q, %v; want ErrMissing and not ErrShredded (no tombstone)", got, err)
	}
	if _, shredded := envelope.ShreddedAt(err); shredded {
		t.Fatalf("ShreddedAt(%v) reports a tombstone for an id never stored", err)
	}
}

func testDestroyTombstone(t *testing.T, s envelope.KeyStore) {
	ctx := t.Context()
	mustCreate(t, s, "er_1", []byte("key-1"))
	mustCreate(t, s, "er_2", []byte("key-2"))
	before := time.Now()
	if err := s.Destroy(ctx, "er_1"); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	after := time.Now()
	first := mustTombstone(t, s, "er_1", before, after)
	time.Sleep(5 * time.Millisecond)
	if err := s.Destroy(ctx, "er_1"); err != nil {
		t.Fatalf("second Destroy: %v", err)
	}
	if again := mustTombstone(t, s, "er_1", before, after); !again.Equal(first) {
		t.Fatalf("second Destroy moved the tombstone's time from %v to %v; it must keep the first", first, again)
	}
	err := s.Create(ctx, "er_1", []byte("resurrected"))
	if at, ok := envelope.ShreddedAt(err); !ok || !at.Equal(first) {
		t.Fatalf("Create after Destroy = %v, want ErrShredded at %v", err, first)
	}
	if _, err := s.Get(ctx, "er_1"); !errors.Is(err, envelope.ErrShredded) {
		t.Fatalf("Get after a refused Create = %v, want ErrShredded", err)
	}
	mustGet(t, s, "er_2", []byte("key-2"))
}

func testDestroyAbsent(t *testing.T, s envelope.KeyStore) {
	ctx := t.Context()
	if err := s.Destroy(ctx, "never"); err != nil {
		t.Fatalf("Destroy of an absent id: %v", err)
	}
	if err := s.Create(ctx, "never", []byte("late")); !errors.Is(err, envelope.ErrShredded) {
		t.Fatalf("Create after Destroy of an absent id = %v, want ErrShredded", err)
	}
	if _, err := s.Get(ctx, "never"); !errors.Is(err, envelope.ErrShredded) || errors.Is(err, envelope.ErrMissing) {
		t.Fatalf("Get = %v, want ErrShredded (a tombstone), not ErrMissing", err)
	}
}

func testDistinctIDs(t *testing.T, s envelope.KeyStore) {
	ctx := t.Context()
	for i, id := range IDs {
		mustCreate(t, s, id, fmt.Appendf(nil, "key-%d", i))
	}
	for i, id := range IDs {
		mustGet(t, s, id, fmt.Appendf(nil, "key-%d", i))
	}
	// Destroying one id leaves every other, its prefixes and extensions included.
	if err := s.Destroy(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	for i, id := range IDs {
		if id == "a" {
			if _, err := s.Get(ctx, id); !errors.Is(err, envelope.ErrShredded) {
				t.Fatalf("Get(%q) after Destroy = %v, want ErrShredded", id, err)
			}
			continue
		}
		mustGet(t, s, id, fmt.Appendf(nil, "key-%d", i))
	}
	if err := s.Create(ctx, "", []byte("k")); err == nil {
		t.Fatal("Create with an empty id succeeded")
	}
}

func testConcurrentCreate(t *testing.T, s envelope.KeyStore) {
	ctx := t.Context()
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = s.Create(ctx, "er_race", fmt.Appendf(nil, "key-%d", i)) })
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("Creates %d and %d both succeeded", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, envelope.ErrExists):
			t.Fatalf("Create %d = %v, want nil or ErrExists", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no Create succeeded")
	}
	mustGet(t, s, "er_race", fmt.Appendf(nil, "key-%d", winner))
}

func testConcurrentCreateDestroy(t *testing.T, s envelope.KeyStore) {
	ctx := t.Context()
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, 2*n)
	for i := range n {
		id := fmt.Sprintf("er_%d", i)
		wg.Go(func() { errs[2*i] = s.Create(ctx, id, []byte("key")) })
		wg.Go(func() { errs[2*i+1] = s.Destroy(ctx, id) })
	}
	wg.Wait()
	for i := range n {
		id := fmt.Sprintf("er_%d", i)
		if err := errs[2*i]; err != nil && !errors.Is(err, envelope.ErrShredded) {
			t.Fatalf("Create(%s) racing Destroy = %v, want nil or ErrShredded", id, err)
		}
		if err := errs[2*i+1]; err != nil {
			t.Fatalf("Destroy(%s): %v", id, err)
		}
		if _, err := s.Get(ctx, id); !errors.Is(err, envelope.ErrShredded) {
			t.Fatalf("Get(%s) after Destroy = %v, want ErrShredded whatever the order", id, err)
		}
	}
}

func testCancelled(t *testing.T, s envelope.KeyStore) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.Create(ctx, "er_1", []byte("k")); err == nil {
		t.Fatal("Create with a cancelled context succeeded")
	}
	if _, err := s.Get(ctx, "er_1"); err == nil || errors.Is(err, envelope.ErrShredded) || errors.Is(err, envelope.ErrMissing) {
		t.Fatalf("Get with a cancelled context = %v, want a context error", err)
	}
	if err := s.Destroy(ctx, "er_1"); err == nil {
		t.Fatal("Destroy with a cancelled context succeeded")
	}
	if err := s.Create(t.Context(), "er_1", []byte("k")); err != nil {
		t.Fatalf("Create after the cancelled calls: %v (a cancelled Destroy must not tombstone)", err)
	}
}

func testReplace(t *testing.T, s envelope.KeyStore) {
	r, ok := s.(envelope.Replacer)
	if !ok {
		t.Logf("%T does not implement envelope.Replacer; Sealer.Rewrap will refuse it", s)
		return
	}
	ctx := t.Context()
	mustCreate(t, s, "er_1", []byte("v1"))
	if err := r.Replace(ctx, "er_1", []byte("v1"), []byte("v2")); err != nil {
		t.Fatalf("Replace: %v", err)
	}
	mustGet(t, s, "er_1", []byte("v2"))
	if err := r.Replace(ctx, "er_1", []byte("v1"), []byte("v3")); !errors.Is(err, envelope.ErrConflict) {
		t.Fatalf("Replace with a stale old key = %v, want ErrConflict", err)
	}
	mustGet(t, s, "er_1", []byte("v2"))
	if err := r.Replace(ctx, "absent", []byte("v1"), []byte("v2")); !errors.Is(err, envelope.ErrMissing) {
		t.Fatalf("Replace of an absent id = %v, want ErrMissing", err)
	}
	if _, err := s.Get(ctx, "absent"); !errors.Is(err, envelope.ErrMissing) {
		t.Fatalf("Replace created a key: Get = %v", err)
	}
	if err := s.Destroy(ctx, "er_1"); err != nil {
		t.Fatal(err)
	}
	if err := r.Replace(ctx, "er_1", []byte("v2"), []byte("v4")); !errors.Is(err, envelope.ErrShredded) {
		t.Fatalf("Replace after Destroy = %v, want ErrShredded", err)
	}
	if _, err := s.Get(ctx, "er_1"); !errors.Is(err, envelope.ErrShredded) {
		t.Fatalf("Replace resurrected a destroyed key: Get = %v", err)
	}
}

func testGetBatch(t *testing.T, s envelope.KeyStore) {
	bg, ok := s.(envelope.BatchGetter)
	if !ok {
		t.Logf("%T does not implement envelope.BatchGetter; Sealer.OpenBatch reads its keys one by one", s)
		return
	}
	ctx := t.Context()
	const n = 230 // more than two reads of 100 keys on DynamoDB
	key := func(i int) []byte { return fmt.Appendf(nil, "wrapped-%03d", i) }
	var ids []string
	for i := range n {
		id := fmt.Sprintf("er_%03d", i)
		mustCreate(t, s, id, key(i))
		ids = append(ids, id)
	}
	shredded := map[string]bool{"er_007": true, "er_150": true, "er_229": true, "never-had-a-key": true}
	before := time.Now()
	for id := range shredded {
		if err := s.Destroy(ctx, id); err != nil {
			t.Fatalf("Destroy(%q): %v", id, err)
		}
	}
	after := time.Now()
	// Absent ids, a tombstone without a key, a repeated id and an empty one, among the keys.
	ids = append(ids, "absent-1", "never-had-a-key", "er_001", "er_150", "", "absent-2", "er_001")
	ids = append([]string{"absent-0"}, ids...)
	got, errs := bg.GetBatch(ctx, ids)
	if len(got) != len(ids) || len(errs) != len(ids) {
		t.Fatalf("GetBatch of %d ids = %d keys, %d errors", len(ids), len(got), len(errs))
	}
	for i, id := range ids {
		var i0 int
		_, scanErr := fmt.Sscanf(id, "er_%03d", &i0)
		switch {
		case id == "":
			if errs[i] == nil || errors.Is(errs[i], envelope.ErrMissing) || errors.Is(errs[i], envelope.ErrShredded) {
				t.Errorf("GetBatch: empty id: %q, %v; want an error that is neither missing nor shredded", got[i], errs[i])
			}
		case shredded[id]:
			at, ok := envelope.ShreddedAt(errs[i])
			if !ok || errors.Is(errs[i], envelope.ErrMissing) || got[i] != nil {
				t.Errorf("GetBatch: %q = %q, %v; want ErrShredded (a tombstone)", id, got[i], errs[i])
			} else if at.Before(before.Add(-time.Millisecond)) || at.After(after.Add(time.Millisecond)) {
				t.Errorf("GetBatch: %q destroyed at %v, want between %v and %v", id, at, before, after)
			}
		case scanErr != nil: // an id never stored
			if !errors.Is(errs[i], envelope.ErrMissing) || errors.Is(errs[i], envelope.ErrShredded) || got[i] != nil {
				t.Errorf("GetBatch: %q = %q, %v; want ErrMissing, not ErrShredded", id, got[i], errs[i])
			}
		default:
			if errs[i] != nil || !bytes.Equal(got[i], key(i0)) {
				t.Errorf("GetBatch: %q = %q, %v; want %q", id, got[i], errs[i], key(i0))
			}
		}
		// Each id is answered as Get answers it.
		w, err := s.Get(ctx, id)
		if !bytes.Equal(w, got[i]) || (err == nil) != (errs[i] == nil) ||
			errors.Is(err, envelope.ErrMissing) != errors.Is(errs[i], envelope.ErrMissing) ||
			errors.Is(err, envelope.ErrShredded) != errors.Is(errs[i], envelope.ErrShredded) {
			t.Errorf("GetBatch: %q = %q, %v; Get = %q, %v", id, got[i], errs[i], w, err)
		}
	}
	// A repeated id gets a copy of its own.
	first, last := got[2], got[len(got)-1] // er_001 at both
	first[0] ^= 0xff
	if !bytes.Equal(last, key(1)) {
		t.Errorf("GetBatch: changing the key returned for one index changed another's to %q", last)
	}
	if again, err := s.Get(ctx, "er_001"); err != nil || !bytes.Equal(again, key(1)) {
		t.Errorf("Get after mutating a returned key = %q, %v: the store must keep its own copy", again, err)
	}
	if got, errs := bg.GetBatch(ctx, nil); len(got) != 0 || len(errs) != 0 {
		t.Errorf("GetBatch of no ids = %d keys, %d errors", len(got), len(errs))
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, errs = bg.GetBatch(cancelled, ids[:3])
	for i, err := range errs {
		if err == nil || errors.Is(err, envelope.ErrMissing) || errors.Is(err, envelope.ErrShredded) {
			t.Errorf("GetBatch with a cancelled context: %q: %v, want a context error", ids[i], err)
		}
	}
}

func mustCreate(t *testing.T, s envelope.KeyStore, id string, w []byte) {
	t.Helper()
	if err := s.Create(t.Context(), id, w); err != nil {
		t.Fatalf("Create(%q): %v", id, err)
	}
}

// mustTombstone asserts that Get reports id destroyed between before and after (with a
// millisecond of slack for stores that round) and returns the recorded time.
func mustTombstone(t *testing.T, s envelope.KeyStore, id string, before, after time.Time) time.Time {
	t.Helper()
	_, err := s.Get(t.Context(), id)
	at, ok := envelope.ShreddedAt(err)
	if !ok || errors.Is(err, envelope.ErrMissing) {
		t.Fatalf("Get(%q) after Destroy = %v, want ErrShredded", id, err)
	}
	if at.Before(before.Add(-time.Millisecond)) || at.After(after.Add(time.Millisecond)) {
		t.Fatalf("Get(%q): tombstone time %v, want the time of Destroy, between %v and %v", id, at, before, after)
	}
	return at
}

func mustGet(t *testing.T, s envelope.KeyStore, id string, want []byte) {
	t.Helper()
	got, err := s.Get(t.Context(), id)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("Get(%q) = %q, %v; want %q", id, got, err, want)
	}
}
