package envelope

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func openKeys(t *testing.T, dir string) *DirKeyStore {
	t.Helper()
	s, err := NewDirKeyStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// holding returns the files under dir that contain b.
func holding(t *testing.T, dir string, b []byte) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		content, err := os.ReadFile(p)
		if bytes.Contains(content, b) {
			found = append(found, filepath.Base(p))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

func wrappedKey(id string) []byte { return []byte("wrapped-data-key-of-" + id + "-0123456789") }

func TestDirKeyStoreDestroyAndCompactionLeaveNoKey(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openKeys(t, dir)
	for _, id := range []string{"er_a", "er_b", "er_c"} {
		if err := s.Create(ctx, id, wrappedKey(id)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Replace(ctx, "er_c", wrappedKey("er_c"), wrappedKey("er_c2")); err != nil {
		t.Fatal(err)
	}
	if err := s.Destroy(ctx, "er_a"); err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{"er_a", "er_c"} {
		if f := holding(t, dir, wrappedKey(gone)); len(f) > 0 {
			t.Fatalf("%v still hold the key of %s after Destroy or Replace", f, gone)
		}
	}
	s.mu.Lock()
	err := s.maybeCompact(true)
	s.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if f := holding(t, dir, wrappedKey("er_a")); len(f) > 0 {
		t.Fatalf("%v hold the destroyed key after compaction", f)
	}
	if f := holding(t, dir, wrappedKey("er_b")); len(f) != 1 {
		t.Fatalf("the live key is in %v after compaction, want one log file", f)
	}
	// Keys copied by the compaction are overwritten in the new log too.
	if err := s.Destroy(ctx, "er_b"); err != nil {
		t.Fatal(err)
	}
	if f := holding(t, dir, wrappedKey("er_b")); len(f) > 0 {
		t.Fatalf("%v hold the key destroyed after compaction", f)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	r := openKeys(t, dir)
	for _, id := range []string{"er_a", "er_b"} {
		if err := r.Create(ctx, id, wrappedKey(id)); !errors.Is(err, ErrShredded) {
			t.Errorf("Create of destroyed %s after reopen = %v, want ErrShredded", id, err)
		}
	}
	if got, err := r.Get(ctx, "er_c"); err != nil || !bytes.Equal(got, wrappedKey("er_c2")) {
		t.Errorf("replaced key after reopen = %q, %v", got, err)
	}
}

func TestDirKeyStoreCutsTornLastRecord(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openKeys(t, dir)
	if err := s.Create(ctx, "er_1", wrappedKey("er_1")); err != nil {
		t.Fatal(err)
	}
	start := s.log.Bytes()
	if err := s.Create(ctx, "er_2", wrappedKey("er_2")); err != nil {
		t.Fatal(err)
	}
	end := s.log.Bytes()
	s.Close()
	name := filepath.Base(s.log.File())
	full, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	for cut := start; cut < end; cut++ {
		crashed := t.TempDir()
		if err := os.WriteFile(filepath.Join(crashed, name), full[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		r, err := NewDirKeyStore(crashed)
		if err != nil {
			t.Fatalf("cut at %d: %v", cut, err)
		}
		if got, err := r.Get(ctx, "er_1"); err != nil || !bytes.Equal(got, wrappedKey("er_1")) {
			t.Fatalf("cut at %d: complete record lost: %q, %v", cut, got, err)
		}
		if _, err := r.Get(ctx, "er_2"); !errors.Is(err, ErrMissing) {
			t.Fatalf("cut at %d: torn record read as %v, want ErrMissing", cut, err)
		}
		if err := r.Create(ctx, "er_2", wrappedKey("er_2")); err != nil {
			t.Fatalf("cut at %d: create after recovery: %v", cut, err)
		}
		r.Close()
	}
}

func TestDirKeyStoreFailedSyncLeavesNoKey(t *testing.T) {
	ctx := context.Background()
	s := openKeys(t, t.TempDir())
	failing := errors.New("injected fsync failure")
	s.log.Sync = func(*os.File) error { s.log.Sync = (*os.File).Sync; return failing }
	if err := s.Create(ctx, "er_1", wrappedKey("er_1")); !errors.Is(err, failing) {
		t.Fatalf("Create with a failing fsync = %v, want the fsync error", err)
	}
	if _, err := s.Get(ctx, "er_1"); !errors.Is(err, ErrMissing) {
		t.Fatalf("Get after the failed Create = %v, want ErrMissing (absent)", err)
	}
	if err := s.Create(ctx, "er_1", wrappedKey("er_1")); err != nil {
		t.Fatalf("Create after the failed one: %v", err)
	}
}

func TestDirKeyStoreConcurrentCreatesAreDurable(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openKeys(t, dir)
	s.compactAt = 64 << 10
	var wg sync.WaitGroup
	for g := range 64 {
		wg.Go(func() {
			for i := range 50 {
				id := fmt.Sprintf("er_%d_%d", g, i)
				if err := s.Create(ctx, id, wrappedKey(id)); err != nil {
					t.Error(err)
					return
				}
				if i%10 == 0 {
					if err := s.Destroy(ctx, id); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if s.log.Generation() < 2 {
		t.Errorf("log generation %d: no compaction ran among the writers", s.log.Generation())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	r := openKeys(t, dir)
	for g := range 64 {
		for i := range 50 {
			id := fmt.Sprintf("er_%d_%d", g, i)
			got, err := r.Get(ctx, id)
			if i%10 == 0 && !errors.Is(err, ErrShredded) || i%10 != 0 && (err != nil || !bytes.Equal(got, wrappedKey(id))) {
				t.Fatalf("%s after reopen: %q, %v", id, got, err)
			}
			if at, _ := ShreddedAt(err); i%10 == 0 && at.IsZero() {
				t.Fatalf("%s after compaction and reopen: the tombstone lost its time", id)
			}
		}
	}
}

func TestDirKeyStoreLocksDirectory(t *testing.T) {
	dir := t.TempDir()
	s := openKeys(t, dir)
	if _, err := NewDirKeyStore(dir); err == nil {
		t.Fatal("a second NewDirKeyStore of an open directory succeeded")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(context.Background(), "er_1", []byte("w")); err == nil {
		t.Fatal("Create after Close succeeded")
	}
	openKeys(t, dir)
}

// A tombstone written before tombstones held a time still reads as shredded, with no time,
// across a reopen and a compaction.
func TestDirKeyStoreReadsTombstonesWithoutTime(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openKeys(t, dir)
	if err, _ := s.change("er_old", func(*keyEntry) ([]byte, int, error) { return idRecord(opTombstone, "er_old"), 0, nil }); err != nil {
		t.Fatal(err)
	}
	s.Close()
	r := openKeys(t, dir)
	check := func(when string) {
		t.Helper()
		_, err := r.Get(ctx, "er_old")
		if at, shredded := ShreddedAt(err); !shredded || !at.IsZero() || errors.Is(err, ErrMissing) {
			t.Fatalf("%s: Get of an old tombstone = %v, want ErrShredded without a time", when, err)
		}
	}
	check("after reopen")
	r.mu.Lock()
	err := r.maybeCompact(true)
	r.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	check("after compaction")
}
