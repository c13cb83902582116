package auditlog_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/auditlog/auditlogtest"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/retry"
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
		if !retry.IsPermanent(err) {
			t.Errorf("%s without an id: %v, want a permanent error", name, err)
		}
	}
}

// goldenReceipts are the receipts whose hashes are pinned, one per canonical format; the
// second's strings need escaping (HTML characters, non-ASCII, U+2028) and its times have
// sub-millisecond digits and a whole second.
func goldenReceipts() map[string]event.Receipt {
	v1 := auditlogtest.Receipt("acme", "req-golden")
	v1.Seq, v1.PrevHash = 7, strings.Repeat("ab", 32)
	v2 := auditlogtest.Receipt("acme", "req-golden-2")
	v2.Seq, v2.PrevHash = 8, strings.Repeat("cd", 32)
	v2.CompletedAt = v2.RequestedAt.Add(2*time.Second + 120*time.Millisecond + 456*time.Microsecond)
	v2.DueAt = v2.RequestedAt.Add(time.Hour)
	v2.Stores[0].Locations[0].Location = "shopbot_<acme> & café\u2028"
	v2.Stores[0].Physical = "vacuum pending"
	discovered := v2.RequestedAt.Add(-time.Hour + 7*time.Millisecond)
	v2.Stores = append(v2.Stores, event.StoreEvidence{
		Store: "dataset", Kind: "dataset", Status: event.StatusNothingFound,
		Locations: []event.LocationCount{},
		Verification: event.Verification{
			Method: "re-read", Excluded: []string{"img/cover.png", "img/logo.png"},
			Similar: []string{"42"}, DiscoveryRunAt: &discovered, DiscoveryUncovered: 1,
		},
	})
	v3 := auditlogtest.Receipt("acme", "req-golden-3")
	v3.Seq, v3.PrevHash = 9, strings.Repeat("ef", 32)
	shred := v3.CompletedAt.Add(42*24*time.Hour + 345*time.Microsecond)
	due := v3.CompletedAt.Add(7 * 24 * time.Hour)
	v3.IdentifiersShredAt = &shred
	v3.Stores[0].PhysicalErasureDue = &due
	v3.Stores = append(v3.Stores, event.StoreEvidence{
		Store: "audit_log", Kind: "audit_log", Status: event.StatusNoPII,
		Locations: []event.LocationCount{}, Verification: event.Verification{Method: "scan"},
	})
	v4 := auditlogtest.Receipt("acme", "req-golden-4")
	v4.Seq, v4.PrevHash = 10, strings.Repeat("01", 32)
	v4.Status = event.ReceiptComplete
	v4.Review = []event.ReviewItem{{Store: "qdrant", Kind: event.ReviewSimilar, Item: "900001"}}
	v4.Stores[0].Verification.OutsideInventory = []event.OutsideLocation{
		{Location: "kb_{tenant}/metadata.customer_id", Found: 0, Suggest: "name: kb\nkind: qdrant\n"},
		{Location: "crm:{tenant}:{id}", Unexamined: "bound reached after 10000 keys"},
	}
	return map[string]event.Receipt{"receipt_v1": v1, "receipt_v2": v2, "receipt_v3": v3, "receipt_v4": v4}
}

// TestHashReceiptGolden pins the canonical form of each format: the hash of a fixed
// receipt, and the receipt as JSON with that hash, which docs/receipt_hash.py (an
// independent implementation in Python) must recompute.
// It runs python3, so it is not parallel: a fork while a parallel test closes a store
// would carry the store's flock into the child, and that test's reopen would fail.
func TestHashReceiptGolden(t *testing.T) {
	for name, r := range goldenReceipts() {
		r.Hash = auditlog.HashReceipt(r)
		path := filepath.Join("testdata", name+".json")
		b, err := json.MarshalIndent(r, "", "  ")
		must(t, err)
		if *update {
			must(t, os.MkdirAll("testdata", 0o755))
			must(t, os.WriteFile(path, append(b, '\n'), 0o644))
		}
		want, err := os.ReadFile(path)
		must(t, err)
		var golden event.Receipt
		must(t, json.Unmarshal(want, &golden))
		if r.Hash != golden.Hash {
			t.Errorf("%s: HashReceipt = %s, golden %s: the canonical form changed (run with -update only if intended)", name, r.Hash, golden.Hash)
		}
		out, err := exec.Command("python3", "../../docs/receipt_hash.py", path).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != golden.Hash {
			t.Errorf("%s: docs/receipt_hash.py: %v\n%s\nwant %s", name, err, out, golden.Hash)
		}
	}
	if got := auditlog.HashReceipt(goldenReceipts()["receipt_v1"]); got != "b14dc1b51d1babff210729d40bcec50e15870148c3495374a571e97b0fa4fc8a" {
		t.Errorf("format 1 hash %s: receipts issued before format 2 no longer verify", got)
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
		"store.unexamined":  func(r *event.Receipt) { r.Stores[0].Verification.Unexamined = 1 },
		"store.unexamined_items": func(r *event.Receipt) {
			r.Stores[0].Verification.UnexaminedItems = []string{"a: b"}
		},
		"store.excluded":    func(r *event.Receipt) { r.Stores[0].Verification.Excluded = []string{"a"} },
		"store.attestation": func(r *event.Receipt) { r.Stores[0].Verification.Attestation = "att-1" },
		"store.mentions":    func(r *event.Receipt) { r.Stores[0].Verification.Mentions = 1 },
		"store.similar":     func(r *event.Receipt) { r.Stores[0].Verification.Similar = []string{"7"} },
		"store.discovery_run_at": func(r *event.Receipt) {
			at := r.CompletedAt
			r.Stores[0].Verification.DiscoveryRunAt = &at
		},
		"store.discovery_uncovered": func(r *event.Receipt) { r.Stores[0].Verification.DiscoveryUncovered = 1 },
		"review": func(r *event.Receipt) {
			r.Review = []event.ReviewItem{{Store: "qdrant", Kind: event.ReviewSimilar, Item: "7"}}
		},
		"store.outside_inventory": func(r *event.Receipt) {
			r.Stores[0].Verification.OutsideInventory = []event.OutsideLocation{{Location: "crm:{tenant}:{id}"}}
		},
		"audit_log_pii": func(r *event.Receipt) { r.AuditLogPII = true },
		"status":        func(r *event.Receipt) { r.Status = "x" },
		"seq":           func(r *event.Receipt) { r.Seq++ },
		"prev_hash":     func(r *event.Receipt) { r.PrevHash = "x" },
		"identifiers_shred_at": func(r *event.Receipt) {
			at := r.CompletedAt
			r.IdentifiersShredAt = &at
		},
		"store.physical_erasure_due": func(r *event.Receipt) {
			at := r.CompletedAt
			r.Stores[0].PhysicalErasureDue = &at
		},
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

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestHashReceiptFormat2 covers format 2's fields in both directions: dropping them from a
// format-2 receipt (which would make it format 1) changes the hash as much as adding them.
func TestHashReceiptFormat2(t *testing.T) {
	t.Parallel()
	base := goldenReceipts()["receipt_v2"]
	h := auditlog.HashReceipt(base)
	for name, mutate := range map[string]func(v *event.Verification){
		"excluded dropped":      func(v *event.Verification) { v.Excluded = nil },
		"excluded reordered":    func(v *event.Verification) { v.Excluded[0], v.Excluded[1] = v.Excluded[1], v.Excluded[0] },
		"unexamined added":      func(v *event.Verification) { v.Unexamined = 1 },
		"unexamined item added": func(v *event.Verification) { v.UnexaminedItems = []string{"x: y"} },
		"attestation added":     func(v *event.Verification) { v.Attestation = "att-1" },
		"similar dropped":       func(v *event.Verification) { v.Similar = nil },
		"discovery time moved":  func(v *event.Verification) { t := v.DiscoveryRunAt.Add(time.Second); v.DiscoveryRunAt = &t },
	} {
		r := goldenReceipts()["receipt_v2"]
		mutate(&r.Stores[1].Verification)
		if auditlog.HashReceipt(r) == h {
			t.Errorf("%s does not change the hash", name)
		}
	}
}

// An addendum altered in the directory (its counts rewritten, with or without a new hash)
// breaks the tenant's chain, and survives a reopen as a break.
func TestVerifyChainDetectsAlteredAddendum(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for name, alter := range map[string]func(a *auditlog.Addendum){
		"counts":          func(a *auditlog.Addendum) { a.Stores[0].Deleted = 0 },
		"type and rehash": func(a *auditlog.Addendum) { a.Type = auditlog.AddendumReverified; a.Hash = auditlog.HashAddendum(*a) },
		"another receipt": func(a *auditlog.Addendum) { a.ReceiptID = "rcpt-other"; a.Hash = auditlog.HashAddendum(*a) },
		"moved in time":   func(a *auditlog.Addendum) { a.At = a.At.Add(-time.Hour) },
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := auditlog.OpenDir(dir)
			must(t, err)
			rc, err := auditlog.Issue(ctx, s, auditlogtest.Receipt("acme", "req-1"))
			must(t, err)
			a, _, err := auditlog.Append(ctx, s, auditlogtest.Addendum("req-1/sweep-1", auditlog.AddendumReappeared, rc.ReceiptID, "req-1", "acme"))
			must(t, err)
			_, err = auditlog.Issue(ctx, s, auditlogtest.Receipt("acme", "req-2"))
			must(t, err)
			must(t, auditlog.VerifyChain(ctx, s, "acme"))
			alter(&a)
			must(t, s.OverwriteAddendum(ctx, a))
			must(t, s.Close())
			s, err = auditlog.OpenDirReadOnly(dir)
			must(t, err)
			if err := auditlog.VerifyChain(ctx, s, "acme"); !errors.Is(err, auditlog.ErrChainBroken) {
				t.Fatalf("VerifyChain after altering the addendum = %v, want ErrChainBroken", err)
			}
		})
	}
}

func TestAwaitingUntilEveryExpectedStoreReported(t *testing.T) {
	ctx := context.Background()
	s := openDir(t)
	awaiting := func() bool {
		t.Helper()
		w, err := s.Awaiting(ctx, "r1")
		must(t, err)
		return w
	}
	if !awaiting() {
		t.Fatal("a request that is not stored is not awaiting reports")
	}
	must(t, s.CreateReport(ctx, event.StoreDone{RequestID: "r1", Store: "qdrant", Attempt: 1, Status: event.StatusDeleted}))
	must(t, s.PutRequest(ctx, auditlog.Request{RequestID: "r1", TenantID: "acme", Attempt: 1, ExpectedStores: []string{"qdrant", "redis"}}))
	if !awaiting() {
		t.Fatal("redis has not reported, yet the request is not awaiting")
	}
	// a report stored under another name (a find beside the store's report) does not count
	must(t, s.CreateReport(ctx, event.StoreDone{RequestID: "r1", Store: "redis#found", Attempt: 1}))
	if !awaiting() {
		t.Fatal("a report under another store's name counted as redis's")
	}
	must(t, s.CreateReport(ctx, event.StoreDone{RequestID: "r1", Store: "redis", Attempt: 1, Status: event.StatusNothingFound}))
	if awaiting() {
		t.Fatal("every expected store reported, yet the request is awaiting")
	}
}

// TestHashAddendumGolden pins the canonical form of addenda: v 1 (no review) and v 2
// (with a review decision), each as JSON with its hash, which docs/receipt_hash.py must
// recompute. Not parallel, for TestHashReceiptGolden's reason.
func TestHashAddendumGolden(t *testing.T) {
	at := time.Date(2026, 12, 6, 9, 30, 0, 123456789, time.UTC)
	v1 := auditlog.Addendum{
		AddendumID: "req-1/sweep-1/qdrant", ReceiptID: "rcpt-1", RequestID: "req-1", TenantID: "acme",
		Type: auditlog.AddendumReappeared, Purpose: event.PurposeSweep, Pass: "sweep-1", At: at,
		Stores: []auditlog.AddendumStore{{Store: "qdrant", Status: "DELETED", Deleted: 2}}, Seq: 11, PrevHash: strings.Repeat("ab", 32),
	}
	v2 := auditlog.Addendum{
		AddendumID: "req-1/review/rv-1", ReceiptID: "rcpt-1", RequestID: "req-1", TenantID: "acme",
		Type: auditlog.AddendumReviewed, Purpose: event.PurposeReview, Pass: "rv-1", At: at,
		Review: &event.ReviewDecision{Store: "qdrant", Kind: event.ReviewSimilar, Item: "900001", Decision: event.ReviewDismiss, Reason: "another customer's order <2>"},
		Seq:    12, PrevHash: strings.Repeat("cd", 32),
	}
	for name, a := range map[string]auditlog.Addendum{"addendum_v1": v1, "addendum_v2": v2} {
		a.Hash = auditlog.HashAddendum(a)
		path := filepath.Join("testdata", name+".json")
		b, err := json.MarshalIndent(a, "", "  ")
		must(t, err)
		if *update {
			must(t, os.WriteFile(path, append(b, '\n'), 0o644))
		}
		want, err := os.ReadFile(path)
		must(t, err)
		var golden auditlog.Addendum
		must(t, json.Unmarshal(want, &golden))
		if a.Hash != golden.Hash {
			t.Errorf("%s: HashAddendum = %s, golden %s: the canonical form changed (run with -update only if intended)", name, a.Hash, golden.Hash)
		}
		out, err := exec.Command("python3", "../../docs/receipt_hash.py", path).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != golden.Hash {
			t.Errorf("%s: docs/receipt_hash.py: %v\n%s\nwant %s", name, err, out, golden.Hash)
		}
	}
	noReview := v2
	noReview.Review = nil
	withReview := v2
	r := *v2.Review
	r.Decision = event.ReviewErase
	withReview.Review = &r
	if h := auditlog.HashAddendum(v2); h == auditlog.HashAddendum(noReview) || h == auditlog.HashAddendum(withReview) {
		t.Error("the review decision is not covered by the addendum's hash")
	}
}
