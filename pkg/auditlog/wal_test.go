package auditlog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/lethe-erasure/lethe/pkg/wal"

	"github.com/lethe-erasure/lethe/pkg/event"
)

func openT(t *testing.T, dir string) *DirStore {
	t.Helper()
	s, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func request(id string) Request {
	return Request{RequestID: id, TenantID: "acme", ExpectedStores: []string{"qdrant"}, Attempt: 1}
}

// logFile returns the path of the store's only log file.
func logFile(t *testing.T, dir string) string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "wal-*.log"))
	if err != nil || len(m) != 1 {
		t.Fatalf("log files %v, %v; want exactly one", m, err)
	}
	return m[0]
}

func TestDirStoreCutsTornLastRecord(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openT(t, dir)
	for _, id := range []string{"r-1", "r-2"} {
		if err := s.PutRequest(ctx, request(id)); err != nil {
			t.Fatal(err)
		}
	}
	start := s.log.Bytes()
	if err := s.PutRequest(ctx, request("r-3")); err != nil {
		t.Fatal(err)
	}
	end := s.log.Bytes()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	full, err := os.ReadFile(logFile(t, dir))
	if err != nil || int64(len(full)) != end {
		t.Fatalf("log holds %d bytes (%v), want %d", len(full), err, end)
	}
	for cut := start; cut < end; cut++ {
		crashed := t.TempDir()
		if err := os.WriteFile(filepath.Join(crashed, filepath.Base(logFile(t, dir))), full[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := OpenDir(crashed)
		if err != nil {
			t.Fatalf("cut at %d: open: %v", cut, err)
		}
		rs, err := s.ListRequests(ctx, "")
		if err != nil || len(rs) != 2 || rs[0].RequestID != "r-1" || rs[1].RequestID != "r-2" {
			t.Fatalf("cut at %d: requests %+v, %v; want r-1 and r-2", cut, rs, err)
		}
		if got := s.log.Bytes(); got != start {
			t.Fatalf("cut at %d: log of %d bytes after open, want the torn record cut off at %d", cut, got, start)
		}
		rep := s.Repairs()
		switch {
		case cut == start && len(rep) != 0:
			t.Fatalf("cut at %d (a record boundary): repairs %v, want none", cut, rep)
		case cut > start && (len(rep) != 1 || rep[0].Offset != start || rep[0].Bytes != cut-start || rep[0].Record != 3):
			t.Fatalf("cut at %d: repairs %v, want record 3 at offset %d, %d bytes", cut, rep, start, cut-start)
		}
		if err := s.PutRequest(ctx, request("r-4")); err != nil {
			t.Fatalf("cut at %d: write after recovery: %v", cut, err)
		}
		s.Close()
	}
	// A damaged record followed by intact ones is not a torn tail: open refuses the log.
	damaged := append([]byte(nil), full...)
	damaged[start-5] ^= 0x40
	corrupt := t.TempDir()
	if err := os.WriteFile(filepath.Join(corrupt, filepath.Base(logFile(t, dir))), damaged, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenDir(corrupt); !errors.Is(err, wal.ErrCorrupt) {
		t.Fatalf("open of a log damaged in the middle = %v, want wal.ErrCorrupt", err)
	}
}

func TestDirStoreReopensAfterCompaction(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openT(t, dir)
	s.compactAt = 4 << 10
	// Written first, so that the compactions below must carry them over.
	for i := range 5 {
		if err := s.MarkPublished(ctx, fmt.Sprintf("r-%d", i), fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AppendRawEvent(ctx, []byte(`{"event_id": "bad", "tenant_id": "acme", "subject_hash": "h", "at": 1}`)); err != nil {
		t.Fatal(err)
	}
	for i := range 2 { // version 1, then version 2 (lifted)
		if err := s.SwapSuppression(ctx, int64(i), event.Suppression{TenantID: "acme", Pseudonym: "p", RequestID: "r-0", State: []string{event.Suppressed, event.Lifted}[i], Version: int64(i + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 300 {
		id := fmt.Sprintf("r-%d", i)
		if err := s.PutRequest(ctx, request(id)); err != nil {
			t.Fatal(err)
		}
		if err := s.PutReport(ctx, event.StoreDone{RequestID: id, Store: "qdrant", Attempt: i % 3}); err != nil {
			t.Fatal(err)
		}
		if err := s.AppendEvent(ctx, Event{EventID: id, TenantID: "acme", SubjectHash: "h", At: time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		if _, err := Issue(ctx, s, event.Receipt{ReceiptID: fmt.Sprint(i), RequestID: fmt.Sprintf("r-%d", i), TenantID: "acme", Status: "COMPLETE"}); err != nil {
			t.Fatal(err)
		}
	}
	forged := event.Receipt{RequestID: "r-0", TenantID: "acme", Seq: 7}
	if err := s.overwriteReceipt(ctx, forged); err != nil {
		t.Fatal(err)
	}
	if s.log.Generation() < 3 {
		t.Fatalf("log generation %d: the log was not compacted", s.log.Generation())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	r := openT(t, dir)
	logFile(t, dir) // the old generations are gone
	if sup, err := r.GetSuppression(ctx, "acme", "p"); err != nil || sup.Version != 2 || sup.State != event.Lifted {
		t.Errorf("suppression after reopen: %+v, %v; want version 2, lifted", sup, err)
	}
	if rs, _ := r.ListRequests(ctx, "acme"); len(rs) != 300 {
		t.Errorf("%d requests after reopen, want 300", len(rs))
	}
	if ds, _ := r.Reports(ctx, "r-299"); len(ds) != 1 || ds[0].Attempt != 299%3 {
		t.Errorf("reports after reopen: %+v", ds)
	}
	if evs, _ := r.RawEvents(ctx, "acme", "h"); len(evs) != 301 {
		t.Errorf("%d events after reopen, want 300 and the undecodable one", len(evs))
	}
	for id, want := range map[string]bool{"r-4": true, "r-5": false} {
		if got, err := r.Published(ctx, id); err != nil || got != want {
			t.Errorf("Published(%s) after reopen = %v, %v; want %v", id, got, err, want)
		}
	}
	// The overwritten receipt disagrees with its index entry and is skipped, as before.
	if rs, _ := r.Receipts(ctx, "acme"); len(rs) != 4 {
		t.Errorf("%d receipts after reopen, want 4", len(rs))
	}
	if h, _ := r.Head(ctx, "acme"); h.Seq != 5 {
		t.Errorf("head seq %d after reopen, want 5", h.Seq)
	}
}

func TestDirStoreConcurrentWritersAreDurable(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openT(t, dir)
	s.compactAt = 256 << 10 // compactions run among the writers
	var wg sync.WaitGroup
	for g := range 64 {
		wg.Go(func() {
			for i := range 50 {
				d := event.StoreDone{RequestID: fmt.Sprintf("r-%d-%d", g, i), Store: "qdrant", Attempt: 1}
				if err := s.PutReport(ctx, d); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	r := openT(t, dir)
	for g := range 64 {
		for i := range 50 {
			if ds, err := r.Reports(ctx, fmt.Sprintf("r-%d-%d", g, i)); err != nil || len(ds) != 1 {
				t.Fatalf("report %d-%d after reopen: %+v, %v", g, i, ds, err)
			}
		}
	}
}

func TestDirStoreFailedSyncLeavesNoState(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openT(t, dir)
	if err := s.PutRequest(ctx, request("r-1")); err != nil {
		t.Fatal(err)
	}
	failing := errors.New("injected fsync failure")
	s.log.Sync = func(*os.File) error { s.log.Sync = (*os.File).Sync; return failing }
	if err := s.PutRequest(ctx, request("r-2")); !errors.Is(err, failing) {
		t.Fatalf("PutRequest with a failing fsync = %v, want the fsync error", err)
	}
	if _, err := s.GetRequest(ctx, "r-2"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetRequest of the failed write = %v, want ErrNotFound", err)
	}
	if err := s.PutRequest(ctx, request("r-3")); err != nil {
		t.Fatalf("write after a failed fsync that was cut off: %v", err)
	}
	// When the failed records cannot be cut off either, the log refuses further writes.
	s.log.Sync = func(*os.File) error { return failing }
	if err := s.SwapHead(ctx, "acme", 0, Head{Seq: 1}); !errors.Is(err, failing) {
		t.Fatalf("SwapHead with a failing fsync = %v", err)
	}
	if h, _ := s.Head(ctx, "acme"); h.Seq != 0 {
		t.Fatalf("head %d after a failed swap, want none", h.Seq)
	}
	s.log.Sync = (*os.File).Sync
	if err := s.PutRequest(ctx, request("r-4")); err == nil {
		t.Fatal("write to a log whose failed records could not be cut off succeeded")
	}
	s.Close()
	r := openT(t, dir)
	rs, _ := r.ListRequests(ctx, "")
	if len(rs) != 2 || rs[0].RequestID != "r-1" || rs[1].RequestID != "r-3" {
		t.Fatalf("requests after reopen %+v, want r-1 and r-3", rs)
	}
}

func TestDirStoreLocksDirectory(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	if _, err := OpenDir(dir); err == nil {
		t.Fatal("a second OpenDir of an open directory succeeded")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.PutRequest(context.Background(), request("r-1")); err == nil {
		t.Fatal("write after Close succeeded")
	}
	openT(t, dir)
}

// TestDirStoreReadOnly opens copies of a store with one flipped byte (in the first, a
// middle and the last record, in a header and in a payload) or a torn last record
// read-only: each fails naming the damaged record, and no byte of the directory changes.
// The intact store reads, refuses writes, and cannot be read while its owner runs.
func TestDirStoreReadOnly(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openT(t, dir)
	var offs []int64 // record starts
	for _, id := range []string{"r-1", "r-2", "r-3"} {
		offs = append(offs, s.log.Bytes())
		if err := s.PutRequest(ctx, request(id)); err != nil {
			t.Fatal(err)
		}
	}
	end := s.log.Bytes()

	if _, err := OpenDirReadOnly(dir); !errors.Is(err, wal.ErrInUse) {
		t.Fatalf("read-only open while the owner runs = %v, want wal.ErrInUse", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	name := filepath.Base(logFile(t, dir))
	full, err := os.ReadFile(logFile(t, dir))
	if err != nil {
		t.Fatal(err)
	}

	ro, err := OpenDirReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	if rs, err := ro.ListRequests(ctx, ""); err != nil || len(rs) != 3 {
		t.Fatalf("read-only requests %+v, %v; want 3", rs, err)
	}
	if err := ro.PutRequest(ctx, request("r-4")); err == nil {
		t.Fatal("write to a read-only store succeeded")
	}
	ro.Close()

	tests := []struct {
		name   string
		data   []byte
		record int
	}{
		{"first record header", flip(full, offs[0]+2), 1},
		{"first record payload", flip(full, offs[0]+20), 1},
		{"middle record payload", flip(full, offs[1]+30), 2},
		{"last record header", flip(full, offs[2]+9), 3},
		{"last record payload", flip(full, end-1), 3},
		{"torn last record", full[:end-7], 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			copyDir := t.TempDir()
			path := filepath.Join(copyDir, name)
			if err := os.WriteFile(path, tt.data, 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := OpenDirReadOnly(copyDir)
			var dmg *wal.DamageError
			if !errors.As(err, &dmg) || !errors.Is(err, wal.ErrCorrupt) {
				t.Fatalf("read-only open = %v, want a wal.DamageError", err)
			}
			if dmg.Record != tt.record || dmg.Offset != offs[tt.record-1] || dmg.File != name {
				t.Errorf("damage %+v, want record %d at offset %d of %s", dmg, tt.record, offs[tt.record-1], name)
			}
			after, err := os.ReadFile(path)
			if err != nil || string(after) != string(tt.data) {
				t.Errorf("read-only open changed the log (%d bytes before, %d after, %v)", len(tt.data), len(after), err)
			}
			if ents, _ := os.ReadDir(copyDir); len(ents) != 1 {
				t.Errorf("read-only open left %d entries in the directory, want the log alone", len(ents))
			}
		})
	}
}

// flip returns a copy of b with the byte at off inverted.
func flip(b []byte, off int64) []byte {
	c := append([]byte(nil), b...)
	c[off] ^= 0xff
	return c
}
