package auditlog_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/auditlog/auditlogtest"
	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/event"
)

var update = flag.Bool("update", false, "rewrite golden files")

func openDir(t *testing.T) *auditlog.DirStore {
	t.Helper()
	s, err := auditlog.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestDirStore(t *testing.T) {
	t.Parallel()
	auditlogtest.Run(t, func(t *testing.T) auditlog.Store { return openDir(t) })
}

func TestDirStoreSurvivesReopen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s, err := auditlog.OpenDir(dir)
	must(t, err)
	hostile := []string{"../../escape", "a/b", ".", "..", strings.Repeat("long-", 60), "x\\y", "ünï"}
	for _, id := range hostile {
		must(t, s.PutRequest(ctx, auditlog.Request{RequestID: id, TenantID: "acme", Attempt: 1}))
		must(t, s.PutReport(ctx, event.StoreDone{RequestID: id, Store: id, Attempt: 1}))
	}
	must(t, s.AppendEvent(ctx, auditlog.Event{EventID: "e1", TenantID: "acme", SubjectHash: auditlogtest.Hash("a"), Type: "query", At: auditlogtest.T0}))
	issued, err := auditlog.Issue(ctx, s, auditlogtest.Receipt("acme", "req-1"))
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, ".tmp", "leftover"), []byte("partial"), 0o600))
	must(t, s.Close())

	s, err = auditlog.OpenDir(dir)
	must(t, err)
	defer s.Close()
	for _, id := range hostile {
		if r, err := s.GetRequest(ctx, id); err != nil || r.RequestID != id {
			t.Errorf("request %q after reopen: %+v, %v", id, r, err)
		}
		if ds, err := s.Reports(ctx, id); err != nil || len(ds) != 1 || ds[0].Store != id {
			t.Errorf("reports of %q after reopen: %+v, %v", id, ds, err)
		}
	}
	if evs, err := s.Events(ctx, "acme", auditlogtest.Hash("a")); err != nil || len(evs) != 1 {
		t.Errorf("events after reopen: %d, %v", len(evs), err)
	}
	if r, err := s.GetReceipt(ctx, "req-1"); err != nil || r.Hash != issued.Hash {
		t.Errorf("receipt after reopen: %+v, %v", r, err)
	}
	must(t, auditlog.VerifyChain(ctx, s, "acme"))
	if _, err := os.Stat(filepath.Join(dir, ".tmp", "leftover")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temporary file left after reopen: %v", err)
	}
	// Nothing escaped the directory.
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "escape")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an id escaped the store directory: %v", err)
	}
}

func TestDirStoreRejectsEmptyIDs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openDir(t)
	for name, err := range map[string]error{
		"event":   s.AppendEvent(ctx, auditlog.Event{TenantID: "acme", SubjectHash: "h"}),
		"request": s.PutRequest(ctx, auditlog.Request{}),
		"report":  s.PutReport(ctx, event.StoreDone{RequestID: "r"}),
		"receipt": s.PutReceipt(ctx, event.Receipt{TenantID: "acme"}),
	} {
		if !deletion.IsPermanent(err) {
			t.Errorf("%s without an id: %v, want a permanent error", name, err)
		}
	}
}

func TestHashReceiptGolden(t *testing.T) {
	t.Parallel()
	r := auditlogtest.Receipt("acme", "req-golden")
	r.Seq, r.PrevHash = 7, strings.Repeat("ab", 32)
	got := auditlog.HashReceipt(r)
	path := filepath.Join("testdata", "receipt_hash.golden")
	if *update {
		must(t, os.MkdirAll("testdata", 0o755))
		must(t, os.WriteFile(path, []byte(got+"\n"), 0o644))
	}
	want, err := os.ReadFile(path)
	must(t, err)
	if got != strings.TrimSpace(string(want)) {
		t.Errorf("HashReceipt = %s, golden %s: the canonical form changed (run with -update only if intended)", got, want)
	}
}

func TestHashReceiptCoversEveryField(t *testing.T) {
	t.Parallel()
	base := auditlogtest.Receipt("acme", "req-1")
	base.Seq, base.PrevHash = 2, "prev"
	h := auditlog.HashReceipt(base)
	mutations := map[string]func(r *event.Receipt){
		"receipt_id":        func(r *event.Receipt) { r.ReceiptID = "x" },
		"request_id":        func(r *event.Receipt) { r.RequestID = "x" },
		"tenant_id":         func(r *event.Receipt) { r.TenantID = "x" },
		"subject_hash":      func(r *event.Receipt) { r.SubjectHash = "x" },
		"key_id":            func(r *event.Receipt) { r.KeyID = "x" },
		"scope":             func(r *event.Receipt) { r.Scope = event.ScopeTenant },
		"regulation":        func(r *event.Receipt) { r.Regulation = "x" },
		"requested_at":      func(r *event.Receipt) { r.RequestedAt = r.RequestedAt.Add(time.Millisecond) },
		"completed_at":      func(r *event.Receipt) { r.CompletedAt = r.CompletedAt.Add(time.Millisecond) },
		"due_at":            func(r *event.Receipt) { r.DueAt = r.DueAt.Add(time.Millisecond) },
		"elapsed_ms":        func(r *event.Receipt) { r.ElapsedMS++ },
		"inventory_version": func(r *event.Receipt) { r.InventoryVersion = "x" },
		"stores":            func(r *event.Receipt) { r.Stores = nil },
		"store.store":       func(r *event.Receipt) { r.Stores[0].Store = "x" },
		"store.kind":        func(r *event.Receipt) { r.Stores[0].Kind = "x" },
		"store.status":      func(r *event.Receipt) { r.Stores[0].Status = event.StatusFailed },
		"store.deleted":     func(r *event.Receipt) { r.Stores[0].Deleted++ },
		"store.locations":   func(r *event.Receipt) { r.Stores[0].Locations[0].Deleted++ },
		"store.location":    func(r *event.Receipt) { r.Stores[0].Locations[0].Location = "x" },
		"store.method":      func(r *event.Receipt) { r.Stores[0].Verification.Method = "x" },
		"store.remaining":   func(r *event.Receipt) { r.Stores[0].Verification.Remaining++ },
		"store.physical":    func(r *event.Receipt) { r.Stores[0].Physical = "x" },
		"audit_log_pii":     func(r *event.Receipt) { r.AuditLogPII = true },
		"status":            func(r *event.Receipt) { r.Status = "x" },
		"seq":               func(r *event.Receipt) { r.Seq++ },
		"prev_hash":         func(r *event.Receipt) { r.PrevHash = "x" },
	}
	for name, mutate := range mutations {
		r := auditlogtest.Receipt("acme", "req-1")
		r.Seq, r.PrevHash = 2, "prev"
		mutate(&r)
		if auditlog.HashReceipt(r) == h {
			t.Errorf("changing %s does not change the hash", name)
		}
	}
	same := map[string]func(r *event.Receipt){
		"hash":            func(r *event.Receipt) { r.Hash = "anything" },
		"time zone":       func(r *event.Receipt) { r.RequestedAt = r.RequestedAt.In(time.FixedZone("x", 3600)) },
		"sub-millisecond": func(r *event.Receipt) { r.CompletedAt = r.CompletedAt.Add(999 * time.Microsecond) },
	}
	for name, mutate := range same {
		r := auditlogtest.Receipt("acme", "req-1")
		r.Seq, r.PrevHash = 2, "prev"
		mutate(&r)
		if auditlog.HashReceipt(r) != h {
			t.Errorf("%s changes the hash", name)
		}
	}
	empty, emptied := event.Receipt{}, event.Receipt{Stores: []event.StoreEvidence{}}
	if auditlog.HashReceipt(empty) != auditlog.HashReceipt(emptied) {
		t.Error("nil and empty store lists hash differently")
	}
	nilLoc := event.Receipt{Stores: []event.StoreEvidence{{Store: "s"}}}
	emptyLoc := event.Receipt{Stores: []event.StoreEvidence{{Store: "s", Locations: []event.LocationCount{}}}}
	if auditlog.HashReceipt(nilLoc) != auditlog.HashReceipt(emptyLoc) {
		t.Error("nil and empty location lists hash differently")
	}
}

// TestHashReceiptSurvivesWire: a receipt issued here and published on erasure.completed
// (Avro) or stored as JSON still verifies after decoding.
func TestHashReceiptSurvivesWire(t *testing.T) {
	t.Parallel()
	s := openDir(t)
	r := auditlogtest.Receipt("acme", "req-wire")
	r.CompletedAt = time.Now() // nanoseconds and a monotonic reading
	issued, err := auditlog.Issue(context.Background(), s, r)
	must(t, err)

	b, err := event.Completed.Encode(issued)
	must(t, err)
	var fromAvro event.Receipt
	must(t, event.Completed.Decode(b, &fromAvro))
	if got := auditlog.HashReceipt(fromAvro); got != issued.Hash {
		t.Errorf("hash after an Avro round trip = %s, want %s", got, issued.Hash)
	}
	j, err := json.Marshal(issued)
	must(t, err)
	var fromJSON event.Receipt
	must(t, json.Unmarshal(j, &fromJSON))
	if got := auditlog.HashReceipt(fromJSON); got != issued.Hash {
		t.Errorf("hash after a JSON round trip = %s, want %s", got, issued.Hash)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
