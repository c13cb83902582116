package workflow

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func mustOpen(t *testing.T, path string) *FileStore {
	t.Helper()
	s, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func logFile(t *testing.T, dir string) string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "wal-*.log"))
	if err != nil || len(m) != 1 {
		t.Fatalf("log files in %s: %v %v", dir, m, err)
	}
	return m[0]
}

// A crash in the middle of an append leaves a torn last record: opening cuts it off, says
// so in Repairs, and keeps every acknowledged write.
func TestFileStoreCutsTornLastRecord(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "workflow")
	s := mustOpen(t, dir)
	for i := range 3 {
		if err := s.Create(ctx, Record{RequestID: fmt.Sprintf("er_%d", i), TenantID: "acme", State: Scheduled, SubmittedAt: at}); err != nil {
			t.Fatal(err)
		}
	}
	acked, err := os.Stat(logFile(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, Record{RequestID: "er_torn", TenantID: "acme", State: Scheduled, SubmittedAt: at}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	full, err := os.Stat(logFile(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	// The last record's append stopped halfway.
	cut := acked.Size() + (full.Size()-acked.Size())/2
	if err := os.Truncate(logFile(t, dir), cut); err != nil {
		t.Fatal(err)
	}
	s2 := mustOpen(t, dir)
	if r := s2.Repairs(); len(r) != 1 || r[0].Offset != acked.Size() {
		t.Errorf("repairs %+v, want the record at %d cut", r, acked.Size())
	}
	got, _ := s2.List(ctx)
	if len(got) != 3 {
		t.Fatalf("%d records after the cut, want the 3 acknowledged: %+v", len(got), got)
	}
	if _, err := s2.Get(ctx, "er_torn"); !errors.Is(err, ErrNotFound) {
		t.Errorf("torn record: %v, want not found", err)
	}
	// The store appends after the cut and the next open replays cleanly.
	if err := s2.Create(ctx, Record{RequestID: "er_torn", TenantID: "acme", State: Scheduled, SubmittedAt: at}); err != nil {
		t.Fatal(err)
	}
	s2.Close()
	s3 := mustOpen(t, dir)
	if r := s3.Repairs(); len(r) != 0 {
		t.Errorf("repairs on a clean reopen: %+v", r)
	}
	if got, _ := s3.List(ctx); len(got) != 4 {
		t.Errorf("%d records, want 4", len(got))
	}
}

// A write whose fsync fails returns the error and leaves nothing: not in memory, not
// after a reopen.
func TestFileStoreFailedSyncLeavesNoState(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := mustOpen(t, dir)
	r := Record{RequestID: "er_1", TenantID: "acme", State: Scheduled, SubmittedAt: at}
	if err := s.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	broken := errors.New("disk full")
	s.log.Sync = func(*os.File) error { return broken }
	moved, _ := r.Move(Cancel, Cancelled, "alice", at)
	moved.Version = 1
	if _, err := s.Swap(ctx, moved); !errors.Is(err, broken) {
		t.Fatalf("swap with a failing fsync: %v", err)
	}
	if err := s.PutHold(ctx, Hold{ID: "hold_1", TenantID: "acme"}); !errors.Is(err, broken) {
		t.Fatalf("put hold with a failing fsync: %v", err)
	}
	check := func(when string, s *FileStore) {
		if got, _ := s.Get(ctx, "er_1"); got.State != Scheduled || got.Version != 1 {
			t.Errorf("%s: %+v", when, got)
		}
		if hs, _ := s.Holds(ctx); len(hs) != 0 {
			t.Errorf("holds %s: %+v", when, hs)
		}
	}
	check("after the failed writes", s)
	s.Close()
	check("after reopen", mustOpen(t, dir))
}

// When most records of the log are superseded, a write compacts it: the new log holds one
// record per live item, and every record and hold, at its last version, survives it and a
// reopen.
func TestFileStoreCompactionKeepsLiveRecords(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := mustOpen(t, dir)
	s.compactMin = 16
	want := map[string]Record{}
	for i := range 5 {
		r := Record{RequestID: fmt.Sprintf("er_%d", i), TenantID: "acme", State: Previewed, SubmittedAt: at.Add(time.Duration(i) * time.Second)}
		if err := s.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		want[r.RequestID] = r
	}
	if err := s.PutHold(ctx, Hold{ID: "hold_1", TenantID: "acme", LegalBasis: "litigation", CreatedAt: at}); err != nil {
		t.Fatal(err)
	}
	gen := s.log.Generation()
	for round := range 6 { // every record rewritten: 30 superseded records
		for id := range want {
			r, _ := s.Get(ctx, id)
			r.ApprovedBy = fmt.Sprintf("round %d", round)
			got, err := s.Swap(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			want[id] = got
		}
	}
	released := Hold{ID: "hold_1", TenantID: "acme", LegalBasis: "litigation", CreatedAt: at, ReleasedAt: at.Add(time.Hour)}
	if err := s.PutHold(ctx, released); err != nil {
		t.Fatal(err)
	}
	if s.log.Generation() == gen {
		t.Fatalf("no compaction after %d records for %d live items", s.appended, len(want)+1)
	}
	if s.appended > 2*(len(want)+1) {
		t.Errorf("%d records in the log after compaction for %d live items", s.appended, len(want)+1)
	}
	s.Close()
	s2 := mustOpen(t, dir)
	got, _ := s2.List(ctx)
	if len(got) != len(want) {
		t.Fatalf("%d records after reopen, want %d", len(got), len(want))
	}
	for _, r := range got {
		w := want[r.RequestID]
		if r.Version != w.Version || r.ApprovedBy != "round 5" || r.Version != 7 {
			t.Errorf("%s after compaction: version %d %q, want %d %q", r.RequestID, r.Version, r.ApprovedBy, w.Version, w.ApprovedBy)
		}
	}
	if hs, _ := s2.Holds(ctx); len(hs) != 1 || hs[0] != released {
		t.Errorf("holds after compaction: %+v", hs)
	}
}

// oldFile is a store in the JSON layout of earlier versions, as their FileStore wrote it.
const oldFile = `{"records":[{"request_id":"er_old1","tenant_id":"acme","subject_hash":"3f9a","scope":"SUBJECT","regulation":"GDPR","state":"SCHEDULED","submitted_by":"portal","submitted_at":"2026-11-30T09:00:00Z","due_at":"2026-12-30T09:00:00Z","execute_at":"2026-12-01T09:00:00Z","window":86400000000000,"history":[{"to":"SCHEDULED","actor":"portal","at":"2026-11-30T09:00:00Z"}],"event":"AAEC","version":1},{"request_id":"er_old2","tenant_id":"acme","subject_hash":"","scope":"TENANT","regulation":"GDPR","state":"AWAITING_APPROVAL","submitted_by":"dpo-1","submitted_at":"2026-11-30T10:00:00Z","due_at":"2026-12-30T10:00:00Z","needs_approval":true,"history":[{"to":"AWAITING_APPROVAL","actor":"dpo-1","at":"2026-11-30T10:00:00Z"}],"version":3}],"holds":[{"hold_id":"hold_1","tenant_id":"acme","store":"dataset","legal_basis":"litigation","reason":"case 7","created_by":"dpo-1","created_at":"2026-11-29T08:00:00Z"}]}`

func checkMigrated(t *testing.T, s *FileStore) {
	t.Helper()
	ctx := context.Background()
	r1, err := s.Get(ctx, "er_old1")
	if err != nil || r1.State != Scheduled || r1.Version != 1 || !r1.ExecuteAt.Equal(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)) ||
		r1.Window != 24*time.Hour || string(r1.Event) != "\x00\x01\x02" || len(r1.History) != 1 {
		t.Errorf("er_old1 after migration: %+v %v", r1, err)
	}
	r2, err := s.Get(ctx, "er_old2")
	if err != nil || r2.State != AwaitingApproval || r2.Version != 3 || !r2.NeedsApproval {
		t.Errorf("er_old2 after migration: %+v %v", r2, err)
	}
	hs, _ := s.Holds(ctx)
	if len(hs) != 1 || hs[0].ID != "hold_1" || hs[0].Reason != "case 7" || hs[0].Store != "dataset" {
		t.Errorf("holds after migration: %+v", hs)
	}
}

// A path holding the JSON file of earlier versions is migrated on open: the records and
// holds move into the log, the file is kept as .migrated, the store works on, and later
// opens read the log.
func TestFileStoreMigratesJSONFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "workflow.json")
	if err := os.WriteFile(path, []byte(oldFile), 0o600); err != nil {
		t.Fatal(err)
	}
	s := mustOpen(t, path)
	checkMigrated(t, s)
	if kept, err := os.ReadFile(path + ".migrated"); err != nil || string(kept) != oldFile {
		t.Errorf("old file kept: %v (%d bytes)", err, len(kept))
	}
	if fi, err := os.Stat(path); err != nil || !fi.IsDir() {
		t.Fatalf("store path after migration: %v", err)
	}
	r, _ := s.Get(ctx, "er_old2")
	r, _ = r.Move(Approve, Scheduled, "dpo-2", at)
	if _, err := s.Swap(ctx, r); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, Record{RequestID: "er_old1"}); !errors.Is(err, ErrExists) {
		t.Errorf("create of a migrated id: %v", err)
	}
	s.Close()
	s2 := mustOpen(t, path)
	if got, _ := s2.Get(ctx, "er_old2"); got.State != Scheduled || got.Version != 4 {
		t.Errorf("after reopen: %+v", got)
	}
	if got, _ := s2.List(ctx); len(got) != 2 {
		t.Errorf("%d records after reopen, want 2", len(got))
	}
}

// A migration interrupted by a crash is finished or redone on the next open: after the
// log was written but before it took the file's place, and while it was being written.
func TestFileStoreMigrationResumes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		crash func(t *testing.T, path string)
	}{
		{"between the renames", func(t *testing.T, path string) {
			if err := os.Rename(path, path+migratedSuffix); err != nil {
				t.Fatal(err)
			}
		}},
		{"while writing the log", func(t *testing.T, path string) {
			if err := os.Truncate(logFile(t, path+migratingSuffix), 20); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "workflow.json")
			if err := os.WriteFile(path, []byte(oldFile), 0o600); err != nil {
				t.Fatal(err)
			}
			// The migration's log, written as migrate writes it.
			s := mustOpen(t, path+migratingSuffix)
			if err := s.Create(context.Background(), Record{RequestID: "er_old1", State: Scheduled}); err != nil {
				t.Fatal(err)
			}
			s.Close()
			if tc.name == "while writing the log" {
				// The migration writes the full state; a torn one is thrown away.
				s2 := mustOpen(t, path+migratingSuffix)
				s2.Close()
			}
			tc.crash(t, path)
			got := mustOpen(t, path)
			if tc.name == "while writing the log" {
				checkMigrated(t, got)
			} else if r, err := got.Get(context.Background(), "er_old1"); err != nil || r.State != Scheduled {
				t.Errorf("finished migration: %+v %v", r, err)
			}
			if _, err := os.Stat(path + migratingSuffix); !os.IsNotExist(err) {
				t.Errorf("%s left: %v", migratingSuffix, err)
			}
			if _, err := os.Stat(path + migratedSuffix); err != nil {
				t.Errorf("old file not kept: %v", err)
			}
		})
	}
}
