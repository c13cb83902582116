package wal

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func writeRecords(t *testing.T, dir string, payloads ...string) {
	t.Helper()
	w, err := Open(dir, "test-1", func([]byte, int64) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, p := range payloads {
		b, _, err := w.Append([]byte(p), 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Commit(b); err != nil {
			t.Fatal(err)
		}
	}
}

func readAll(dir string) ([]string, error) {
	var got []string
	err := Read(dir, "test-1", func(p []byte, _ int64) error {
		got = append(got, string(p))
		return nil
	})
	return got, err
}

// Read replays the newest generation and leaves a superseded one and a missing LOCK as
// they are; Open, the owner, removes the superseded file and reports it.
func TestReadLeavesSupersededGenerations(t *testing.T) {
	dir := t.TempDir()
	writeRecords(t, dir, "old")
	older := filepath.Join(dir, "wal-0000000000000001.log")
	b, err := os.ReadFile(older)
	if err != nil {
		t.Fatal(err)
	}
	writeRecords(t, dir, "new")
	newer := filepath.Join(dir, "wal-0000000000000002.log")
	if err := os.Rename(older, newer); err != nil { // as if a compaction wrote generation 2
		t.Fatal(err)
	}
	if err := os.WriteFile(older, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, lockName)); err != nil {
		t.Fatal(err)
	}

	got, err := readAll(dir)
	if err != nil || !slices.Equal(got, []string{"old", "new"}) {
		t.Fatalf("Read = %q, %v; want the records of generation 2", got, err)
	}
	for _, f := range []string{older, newer} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("Read removed %s: %v", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, lockName)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Read created the LOCK file: %v", err)
	}

	w, err := Open(dir, "test-1", func([]byte, int64) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	rep := w.Repairs()
	if len(rep) != 1 || rep[0].File != filepath.Base(older) || rep[0].Bytes != int64(len(b)) || rep[0].Record != 0 {
		t.Errorf("repairs %v, want the removal of %s (%d bytes)", rep, filepath.Base(older), len(b))
	}
	if _, err := os.Stat(older); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open kept the superseded generation: %v", err)
	}
}

// Read fails on a directory without a log, and on a record its apply refuses, naming it.
func TestReadErrors(t *testing.T) {
	if _, err := readAll(t.TempDir()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Read of an empty directory = %v, want fs.ErrNotExist", err)
	}
	dir := t.TempDir()
	writeRecords(t, dir, "a", "bad", "c")
	err := Read(dir, "test-1", func(p []byte, _ int64) error {
		if string(p) == "bad" {
			return errors.New("unknown operation")
		}
		return nil
	})
	var dmg *DamageError
	if !errors.As(err, &dmg) || dmg.Record != 2 || dmg.Offset != headerSize+recordHead+1 || dmg.Reason != "unknown operation" {
		t.Errorf("Read = %v (%+v), want record 2 at offset %d damaged", err, dmg, headerSize+recordHead+1)
	}
	if err := Read(dir, "other-1", func([]byte, int64) error { return nil }); !errors.As(err, &dmg) || dmg.Record != 0 {
		t.Errorf("Read with another magic = %v, want damage of the file header", err)
	}
}

// TestFailedSyncOfVisibleRecordsBreaksTheLog: a failed fsync cuts plain records off and the
// log goes on; when the failed batch holds a record appended with AppendVisible, the log
// refuses every later append, and reopening it holds only what was synced.
func TestFailedSyncOfVisibleRecordsBreaksTheLog(t *testing.T) {
	dir := t.TempDir()
	w, err := Open(dir, "test-1", func([]byte, int64) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	failing := errors.New("injected fsync failure")
	commit := func(b *Batch, err error) error {
		if err != nil {
			return err
		}
		return w.Commit(b)
	}
	plain := func(p string) error { b, _, err := w.Append([]byte(p), 0); return commit(b, err) }
	if err := plain("synced"); err != nil {
		t.Fatal(err)
	}
	w.Sync = func(*os.File) error { w.Sync = (*os.File).Sync; return failing }
	if err := plain("cut"); !errors.Is(err, failing) {
		t.Fatalf("commit with a failing fsync = %v", err)
	}
	if err := plain("after a plain failure"); err != nil {
		t.Fatalf("append after a failed fsync of plain records: %v", err)
	}
	w.Sync = func(*os.File) error { w.Sync = (*os.File).Sync; return failing }
	if err := commit(w.AppendVisible([]byte("visible"))); !errors.Is(err, failing) {
		t.Fatalf("commit of a visible record with a failing fsync = %v", err)
	}
	if err := plain("after a visible failure"); err == nil {
		t.Fatal("append after a failed fsync of a visible record succeeded")
	}
	w.Close()
	got, err := readAll(dir)
	if err != nil || !slices.Equal(got, []string{"synced", "after a plain failure"}) {
		t.Fatalf("records after reopen %q, %v", got, err)
	}
}
