// Package auditlogtest is the conformance suite every auditlog.Store passes.
//
// Run exercises every Store method against a real backend, then Issue and VerifyChain on
// top of it: concurrent issuing, a writer that crashed between linking the head and
// writing its receipt, the read-order race Issue must avoid, and tampering. To tamper with
// a stored receipt the suite needs the store to implement ReceiptOverwriter (test code
// usually adds it in a _test.go file); without it the suite fails.
package auditlogtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/event"
	"golang.org/x/sync/errgroup"
)

// ReceiptOverwriter replaces the stored receipt of r.RequestID unconditionally, bypassing
// every check, as an attacker with write access to the table could. Only tests use it.
type ReceiptOverwriter interface {
	OverwriteReceipt(ctx context.Context, r event.Receipt) error
}

// EventCount is how many events the pagination test writes for one subject.
const EventCount = 300

// T0 is the base time of the suite's records.
var T0 = time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)

// Hash returns a pseudonym-shaped value (64 hex digits) for a label.
func Hash(label string) string {
	sum := sha256.Sum256([]byte(label))
	return hex.EncodeToString(sum[:])
}

// Receipt returns an unissued receipt of request id in tenant with one store's evidence.
func Receipt(tenant, id string) event.Receipt {
	return event.Receipt{
		ReceiptID: "rcpt-" + id, RequestID: id, TenantID: tenant, SubjectHash: Hash("subject-" + id), KeyID: "k1",
		Scope: event.ScopeSubject, Regulation: "GDPR",
		RequestedAt: T0, CompletedAt: T0.Add(1500 * time.Millisecond), DueAt: T0.Add(30 * 24 * time.Hour),
		ElapsedMS: 1500, InventoryVersion: "v1",
		Stores: []event.StoreEvidence{{
			Store: "qdrant", Kind: "qdrant", Status: event.StatusDeleted, Deleted: 3,
			Locations:    []event.LocationCount{{Location: "shopbot_" + tenant, Deleted: 3}},
			Verification: event.Verification{Method: "exact count", Remaining: 0},
		}},
		Status: event.ReceiptComplete,
	}
}

// Run runs the suite. newStore returns an empty store; the subtests run in parallel, each
// on its own store.
func Run(t *testing.T, newStore func(t *testing.T) auditlog.Store) {
	tests := []struct {
		name string
		run  func(t *testing.T, s auditlog.Store)
	}{
		{"AppendEventIsIdempotent", testAppendEvent},
		{"EventsPaginates", testEventsPaginate},
		{"Requests", testRequests},
		{"ListRequests", testListRequests},
		{"RequestsConcurrent", testRequestsConcurrent},
		{"ReportsKeepTheLatestAttempt", testReports},
		{"CreateReportCreatesOnce", testCreateReport},
		{"RequestState", testRequestState},
		{"ReportLogFoldsRecords", testReportLog},
		{"ReceiptsAreCreatedOnce", testReceipts},
		{"SwapHead", testSwapHead},
		{"IssueConcurrent", testIssueConcurrent},
		{"IssueIsIdempotent", testIssueIdempotent},
		{"IssueWithHeadCaches", testIssueHeadCaches},
		{"IssueHealsCrashedWriter", testIssueHeals},
		{"IssueReadsReceiptAfterHead", testIssueRace},
		{"PublishMarker", testPublishMarker},
		{"Addenda", testAddenda},
		{"Schedule", testSchedule},
		{"Suppressions", testSuppressions},
		{"SuppressConcurrent", testSuppressConcurrent},
		{"Rejections", testRejections},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, newStore(t))
		})
	}
	t.Run("VerifyChainDetectsTampering", func(t *testing.T) {
		t.Parallel()
		testTamper(t, newStore)
	})
}

// testPublishMarker checks a store's publication marks, when it has them: absent until
// marked, then present for that request only; a second mark is harmless.
func testPublishMarker(t *testing.T, s auditlog.Store) {
	pm, ok := s.(auditlog.PublishMarker)
	if !ok {
		return // an optional capability
	}
	ctx := context.Background()
	if got, err := pm.Published(ctx, "r-1"); err != nil || got {
		t.Fatalf("Published before any mark = %v, %v; want false", got, err)
	}
	must(t, pm.MarkPublished(ctx, "r-1", "rcpt-1"))
	must(t, pm.MarkPublished(ctx, "r-1", "rcpt-1"))
	for id, want := range map[string]bool{"r-1": true, "r-2": false, "r": false} {
		if got, err := pm.Published(ctx, id); err != nil || got != want {
			t.Errorf("Published(%s) = %v, %v; want %v", id, got, err, want)
		}
	}
	if err := pm.MarkPublished(ctx, "", "rcpt"); err == nil {
		t.Error("MarkPublished without a request id succeeded")
	}
}

func testAppendEvent(t *testing.T, s auditlog.Store) {
	ctx := context.Background()
	e := auditlog.Event{
		EventID: "e1", TenantID: "acme", SubjectHash: Hash("a"), KeyID: "k1", Type: "query",
		QueryFingerprint: Hash("q"), ChunkIDs: []string{"c1", "c2"}, Model: "m", Path: "/v1/chat", At: T0,
	}
	must(t, s.AppendEvent(ctx, e))
	again := e
	again.Path = "/changed"
	must(t, s.AppendEvent(ctx, again))
	must(t, s.AppendEvent(ctx, auditlog.Event{EventID: "e1", TenantID: "acme", SubjectHash: Hash("b"), Type: "query", At: T0}))
	must(t, s.AppendEvent(ctx, auditlog.Event{EventID: "e1", TenantID: "globex", SubjectHash: Hash("a"), Type: "query", At: T0}))

	got, err := s.Events(ctx, "acme", Hash("a"))
	must(t, err)
	if len(got) != 1 || !sameJSON(got[0], e) {
		t.Fatalf("Events after appending e1 twice = %s, want [%s]", js(got), js(e))
	}
	for _, k := range [][2]string{{"acme", Hash("b")}, {"globex", Hash("a")}} {
		if got, err := s.Events(ctx, k[0], k[1]); err != nil || len(got) != 1 {
			t.Errorf("Events(%s, subject) = %d events, %v; want 1 of its own", k[0], len(got), err)
		}
	}
	if got, err := s.Events(ctx, "acme", Hash("nobody")); err != nil || len(got) != 0 {
		t.Errorf("Events of an unknown subject = %d events, %v; want none", len(got), err)
	}
}

func testEventsPaginate(t *testing.T, s auditlog.Store) {
	ctx := context.Background()
	h := Hash("many")
	for i := EventCount - 1; i >= 0; i-- { // newest first: Events must sort
		e := auditlog.Event{EventID: fmt.Sprintf("ev-%03d", i), TenantID: "acme", SubjectHash: h, KeyID: "k1",
			Type: "retrieval", ChunkIDs: []string{fmt.Sprintf("chunk-%d", i)}, At: T0.Add(time.Duration(i) * time.Millisecond)}
		must(t, s.AppendEvent(ctx, e))
	}
	must(t, s.AppendEvent(ctx, auditlog.Event{EventID: "other", TenantID: "acme", SubjectHash: Hash("other"), Type: "query", At: T0}))
	got, err := s.Events(ctx, "acme", h)
	must(t, err)
	if len(got) != EventCount {
		t.Fatalf("Events returned %d events, want %d", len(got), EventCount)
	}
	for i, e := range got {
		if want := fmt.Sprintf("ev-%03d", i); e.EventID != want || !e.At.Equal(T0.Add(time.Duration(i)*time.Millisecond)) {
			t.Fatalf("event %d is %s at %s, want %s in time order", i, e.EventID, e.At, want)
		}
	}
	if raw, ok := s.(auditlog.RawEventStore); ok {
		stored, err := raw.RawEvents(ctx, "acme", h)
		must(t, err)
		ids := map[string]bool{}
		for _, se := range stored {
			var e auditlog.Event
			if se.Err != nil || json.Unmarshal(se.JSON, &e) != nil || e.SubjectHash != h {
				t.Fatalf("RawEvents item %q, %v: want the JSON of an event of the subject", se.JSON, se.Err)
			}
			ids[e.EventID] = true
		}
		if len(stored) != EventCount || len(ids) != EventCount {
			t.Errorf("RawEvents returned %d items (%d distinct events), want %d", len(stored), len(ids), EventCount)
		}
	}
}

func testRequests(t *testing.T, s auditlog.Store) {
	ctx := context.Background()
	if _, err := s.GetRequest(ctx, "req-1"); !errors.Is(err, auditlog.ErrNotFound) {
		t.Fatalf("GetRequest of an unknown request: %v, want ErrNotFound", err)
	}
	r := auditlog.RequestOf(&event.Requested{
		RequestID: "req-1", TenantID: "acme", SubjectHash: Hash("a"), KeyID: "k1",
		Identifiers: event.Identifiers{SubjectID: "raw-subject", SessionIDs: []string{"raw-session"}},
		Scope:       event.ScopeSubject, Regulation: "GDPR", RequestedAt: T0, DueAt: T0.Add(time.Hour),
		InventoryVersion: "v1", ExpectedStores: []string{"qdrant", "redis"}, Attempt: 1,
	})
	if b := js(r); strings.Contains(b, "raw-") {
		t.Fatalf("RequestOf kept an identifier: %s", b)
	}
	steps := []struct {
		attempt  int
		version  string
		wantVers string
	}{
		{1, "v1", "v1"},
		{0, "older", "v1"}, // an older attempt is ignored without error
		{2, "v2", "v2"},
		{2, "v2-again", "v2-again"}, // the same attempt replaces
		{1, "stale", "v2-again"},
	}
	for _, st := range steps {
		r.Attempt, r.InventoryVersion = st.attempt, st.version
		must(t, s.PutRequest(ctx, r))
		got, err := s.GetRequest(ctx, "req-1")
		must(t, err)
		if got.InventoryVersion != st.wantVers {
			t.Fatalf("after PutRequest(attempt %d, %s): stored %s (attempt %d), want %s", st.attempt, st.version, got.InventoryVersion, got.Attempt, st.wantVers)
		}
	}
	got, _ := s.GetRequest(ctx, "req-1")
	if got.RequestID != "req-1" || got.TenantID != "acme" || !got.DueAt.Equal(T0.Add(time.Hour)) || len(got.ExpectedStores) != 2 || got.Scope != event.ScopeSubject {
		t.Errorf("stored request lost fields: %s", js(got))
	}
}

func testReports(t *testing.T, s auditlog.Store) {
	ctx := context.Background()
	done := func(req, store string, attempt int, st event.Status) event.StoreDone {
		return event.StoreDone{RequestID: req, TenantID: "acme", Store: store, Kind: store, Status: st, Attempt: attempt,
			Locations:    []event.LocationCount{{Location: store + ":acme", Deleted: int64(attempt)}},
			Verification: event.Verification{Method: "read back", Remaining: 0}, StartedAt: T0, FinishedAt: T0.Add(time.Second)}
	}
	if got, err := s.Reports(ctx, "req-1"); err != nil || len(got) != 0 {
		t.Fatalf("Reports of an unknown request = %d, %v; want none", len(got), err)
	}
	must(t, s.PutReport(ctx, done("req-1", "redis", 1, event.StatusFailed)))
	must(t, s.PutReport(ctx, done("req-1", "qdrant", 1, event.StatusDeleted)))
	must(t, s.PutReport(ctx, done("req-2", "qdrant", 5, event.StatusDeleted)))
	must(t, s.PutReport(ctx, done("req-1", "redis", 3, event.StatusDeleted)))
	must(t, s.PutReport(ctx, done("req-1", "redis", 2, event.StatusFailed))) // older: kept silently
	must(t, s.PutReport(ctx, done("req-1", "qdrant", 0, event.StatusFailed)))
	got, err := s.Reports(ctx, "req-1")
	must(t, err)
	if len(got) != 2 || got[0].Store != "qdrant" || got[1].Store != "redis" {
		t.Fatalf("Reports = %s, want qdrant and redis in store order", js(got))
	}
	if got[0].Attempt != 1 || got[0].Status != event.StatusDeleted || got[1].Attempt != 3 || got[1].Status != event.StatusDeleted {
		t.Errorf("Reports kept the wrong attempts: %s", js(got))
	}
	if got[1].Deleted() != 3 || !got[1].FinishedAt.Equal(T0.Add(time.Second)) {
		t.Errorf("report lost fields: %s", js(got[1]))
	}
	must(t, s.PutReport(ctx, done("req-1", "redis", 3, event.StatusNothingFound))) // same attempt replaces
	if got, _ := s.Reports(ctx, "req-1"); len(got) != 2 || got[1].Status != event.StatusNothingFound {
		t.Errorf("a report of the same attempt did not replace: %s", js(got))
	}
}

// testCreateReport checks that CreateReport creates a report only where none is stored,
// whatever the attempts, and leaves a stored one as it was.
func testCreateReport(t *testing.T, s auditlog.Store) {
	ctx := context.Background()
	rep := func(store string, attempt int, st event.Status) event.StoreDone {
		return event.StoreDone{RequestID: "req-1", TenantID: "acme", Store: store, Kind: "redis", Status: st, Attempt: attempt,
			Verification: event.Verification{Method: "read back"}, FinishedAt: T0}
	}
	must(t, s.CreateReport(ctx, rep("redis", 1, event.StatusDeleted)))
	for _, d := range []event.StoreDone{rep("redis", 1, event.StatusNothingFound), rep("redis", 2, event.StatusFailed)} {
		if err := s.CreateReport(ctx, d); !errors.Is(err, auditlog.ErrExists) {
			t.Errorf("CreateReport over a stored report (attempt %d) = %v, want ErrExists", d.Attempt, err)
		}
	}
	must(t, s.CreateReport(ctx, rep("redis#found", 1, "")))
	got, err := s.Reports(ctx, "req-1")
	must(t, err)
	if len(got) != 2 || got[0].Store != "redis" || got[0].Status != event.StatusDeleted || got[0].Attempt != 1 || got[1].Store != "redis#found" {
		t.Errorf("Reports after CreateReport = %s, want the first redis report and its find", js(got))
	}
	must(t, s.PutReport(ctx, rep("redis", 2, event.StatusFailed))) // PutReport still replaces
	if got, _ := s.Reports(ctx, "req-1"); len(got) != 2 || got[0].Attempt != 2 {
		t.Errorf("PutReport after CreateReport did not replace: %s", js(got))
	}
	if err := s.CreateReport(ctx, rep("", 1, event.StatusDeleted)); err == nil || errors.Is(err, auditlog.ErrExists) {
		t.Errorf("CreateReport without a store = %v, want a permanent error", err)
	}
}

// testRequestState checks that RequestState returns the request with exactly its own
// reports and publication mark, and ErrNotFound without the request, reports or not.
func testRequestState(t *testing.T, s auditlog.Store) {
	ctx := context.Background()
	req := auditlog.Request{RequestID: "req-1", TenantID: "acme", SubjectHash: Hash("a"), KeyID: "k1",
		RequestedAt: T0, DueAt: T0.Add(time.Hour), ExpectedStores: []string{"qdrant", "redis"}, Attempt: 2}
	done := func(id, store string) event.StoreDone {
		return event.StoreDone{RequestID: id, TenantID: "acme", Store: store, Kind: store, Status: event.StatusDeleted, Attempt: 2,
			Locations: []event.LocationCount{{Location: store, Deleted: 1}}, Verification: event.Verification{Method: "read back"}}
	}
	must(t, s.PutReport(ctx, done("req-1", "redis")))
	if _, err := s.RequestState(ctx, "req-1"); !errors.Is(err, auditlog.ErrNotFound) {
		t.Fatalf("RequestState with reports but no request = %v, want ErrNotFound", err)
	}
	must(t, s.PutRequest(ctx, req))
	must(t, s.PutReport(ctx, done("req-1", "qdrant")))
	must(t, s.PutReport(ctx, done("req-10", "qdrant")))
	must(t, s.PutRequest(ctx, auditlog.Request{RequestID: "req-10", TenantID: "acme", ExpectedStores: []string{"qdrant"}}))
	must(t, s.PutReceipt(ctx, Receipt("acme", "req-1")))
	st, err := s.RequestState(ctx, "req-1")
	must(t, err)
	if !sameJSON(st.Request, req) {
		t.Errorf("RequestState request = %s, want %s", js(st.Request), js(req))
	}
	if len(st.Reports) != 2 || st.Reports[0].Store != "qdrant" || st.Reports[1].Store != "redis" || st.Reports[0].RequestID != "req-1" {
		t.Errorf("RequestState reports = %s, want qdrant and redis of req-1 in store order", js(st.Reports))
	}
	if st.Published {
		t.Error("RequestState published before any mark")
	}
	pm, ok := s.(auditlog.PublishMarker)
	if !ok {
		return
	}
	must(t, pm.MarkPublished(ctx, "req-1", "rcpt"))
	if st, err := s.RequestState(ctx, "req-1"); err != nil || !st.Published || len(st.Reports) != 2 {
		t.Errorf("RequestState after the mark = %+v, %v; want published with 2 reports", st, err)
	}
	if st, err := s.RequestState(ctx, "req-10"); err != nil || st.Published || len(st.Reports) != 1 {
		t.Errorf("RequestState of another request = %+v, %v; want unpublished with its 1 report", st, err)
	}
}

// testReportLog checks a store that appends reports (auditlog.ReportLog), when it is one:
// a store's records, appended out of seq order, twice, concurrently or beside a report
// PutReport wrote, read as their fold in seq order (auditlog.FoldReports) in Reports and
// RequestState.
func testReportLog(t *testing.T, s auditlog.Store) {
	rl, ok := s.(auditlog.ReportLog)
	if !ok {
		return
	}
	ctx := context.Background()
	rep := func(id, store string, attempt int, st event.Status, deleted int64, runs ...string) event.StoreDone {
		return event.StoreDone{RequestID: id, TenantID: "acme", Store: store, Kind: "redis", Status: st, Attempt: attempt, FoundRuns: runs,
			Locations: []event.LocationCount{{Location: "redis:acme", Deleted: deleted}}, Verification: event.Verification{Method: "read back"}, FinishedAt: T0}
	}
	must(t, s.PutRequest(ctx, auditlog.Request{RequestID: "req-1", TenantID: "acme", ExpectedStores: []string{"qdrant", "redis"}, Attempt: 1}))
	must(t, s.PutReport(ctx, rep("req-1", "qdrant", 1, event.StatusDeleted, 4)))
	ok1 := rep("req-1", "redis", 1, event.StatusDeleted, 2, "run-1")
	must(t, rl.AppendReport(ctx, ok1, 10))
	must(t, rl.AppendReport(ctx, rep("req-1", "redis#found", 1, "", 3, "run-1"), 4))
	must(t, rl.AppendReport(ctx, ok1, 10)) // a redelivery
	must(t, rl.AppendReport(ctx, rep("req-1", "redis", 1, event.StatusFailed, 0, "run-2"), 11))
	check := func(what string, got []event.StoreDone, wantAttempt int, wantStatus event.Status, wantDeleted int64) {
		t.Helper()
		if len(got) != 3 || got[0].Store != "qdrant" || got[1].Store != "redis" || got[2].Store != "redis#found" {
			t.Fatalf("%s = %s, want qdrant, redis and redis#found", what, js(got))
		}
		r := got[1]
		if r.Attempt != wantAttempt || r.Status != wantStatus || r.Deleted() != wantDeleted {
			t.Errorf("%s: redis = attempt %d, %s, %d deleted; want attempt %d, %s, %d", what, r.Attempt, r.Status, r.Deleted(), wantAttempt, wantStatus, wantDeleted)
		}
		if got[0].Deleted() != 4 || got[2].Deleted() != 3 {
			t.Errorf("%s: qdrant or the find changed: %s", what, js(got))
		}
	}
	got, err := s.Reports(ctx, "req-1")
	must(t, err)
	check("Reports", got, 1, event.StatusDeleted, 2)
	if runs := got[1].FoundRuns; len(runs) != 2 {
		t.Errorf("the fold names runs %v, want both runs", runs)
	}
	must(t, rl.AppendReport(ctx, rep("req-1", "redis", 2, event.StatusNothingFound, 0), 12))
	st, err := s.RequestState(ctx, "req-1")
	must(t, err)
	check("RequestState after a later attempt", st.Reports, 2, event.StatusNothingFound, 0)

	// two runs' reports that tie: the fold keeps what merging them in seq order keeps, not
	// what their order of arrival would
	first, second := rep("req-o", "redis", 1, event.StatusDeleted, 2, "run-a"), rep("req-o", "redis", 1, event.StatusDeleted, 2, "run-b")
	second.Locations, second.FinishedAt = []event.LocationCount{{Location: "other:acme", Deleted: 2}}, T0.Add(time.Second)
	must(t, rl.AppendReport(ctx, second, 21))
	must(t, rl.AppendReport(ctx, first, 20))
	if got, err := s.Reports(ctx, "req-o"); err != nil || len(got) != 1 || !sameJSON(got[0], auditlog.MergeReports(first, second)) {
		t.Errorf("Reports of two tied runs = %s, %v; want %s", js(got), err, js(auditlog.MergeReports(first, second)))
	}

	// concurrent appends share calls and each is read back, the same key twice in a group too
	var g errgroup.Group
	for i := range 60 {
		g.Go(func() error {
			return rl.AppendReport(ctx, rep(fmt.Sprintf("req-c%d", i%3), fmt.Sprintf("store-%02d", i%20), 1, event.StatusDeleted, int64(i%20)), int64(i))
		})
	}
	must(t, g.Wait())
	for i := range 3 {
		got, err := s.Reports(ctx, fmt.Sprintf("req-c%d", i))
		must(t, err)
		if len(got) != 20 {
			t.Errorf("req-c%d has %d stores after concurrent appends, want 20", i, len(got))
		}
	}
	if err := rl.AppendReport(ctx, rep("req-1", "", 1, event.StatusDeleted, 0), 13); err == nil {
		t.Error("AppendReport without a store succeeded")
	}
}

func testReceipts(t *testing.T, s auditlog.Store) {
	ctx := context.Background()
	if _, err := s.GetReceipt(ctx, "req-a"); !errors.Is(err, auditlog.ErrNotFound) {
		t.Fatalf("GetReceipt of an unknown request: %v, want ErrNotFound", err)
	}
	a, b, g := Receipt("acme", "req-a"), Receipt("acme", "req-b"), Receipt("globex", "req-g")
	a.Seq, b.Seq, g.Seq = 1, 2, 1
	must(t, s.PutReceipt(ctx, b))
	must(t, s.PutReceipt(ctx, a))
	must(t, s.PutReceipt(ctx, g))
	forged := a
	forged.Seq, forged.Stores = 7, nil
	if err := s.PutReceipt(ctx, forged); !errors.Is(err, auditlog.ErrExists) {
		t.Fatalf("second PutReceipt: %v, want ErrExists", err)
	}
	got, err := s.GetReceipt(ctx, "req-a")
	must(t, err)
	if !sameJSON(got, a) {
		t.Fatalf("GetReceipt = %s, want the first receipt %s", js(got), js(a))
	}
	rs, err := s.Receipts(ctx, "acme")
	must(t, err)
	if len(rs) != 2 || rs[0].RequestID != "req-a" || rs[1].RequestID != "req-b" || !sameJSON(rs[1], b) {
		t.Fatalf("Receipts(acme) = %s, want req-a then req-b, unchanged", js(rs))
	}
	if rs, err := s.Receipts(ctx, "globex"); err != nil || len(rs) != 1 || rs[0].RequestID != "req-g" {
		t.Errorf("Receipts(globex) = %s, %v; want only its own", js(rs), err)
	}
	if rs, err := s.Receipts(ctx, "initech"); err != nil || len(rs) != 0 {
		t.Errorf("Receipts of a tenant without receipts = %d, %v", len(rs), err)
	}
}

func testSwapHead(t *testing.T, s auditlog.Store) {
	ctx := context.Background()
	h, err := s.Head(ctx, "acme")
	if err != nil || h.Seq != 0 || h.Hash != "" {
		t.Fatalf("Head of a new tenant = %+v, %v; want the zero Head", h, err)
	}
	r1 := Receipt("acme", "req-1")
	r1.Seq, r1.Hash = 1, "h1"
	h1 := auditlog.Head{Seq: 1, Hash: "h1", RequestID: "req-1", Receipt: r1}
	if err := s.SwapHead(ctx, "acme", 1, h1); !errors.Is(err, auditlog.ErrConflict) {
		t.Fatalf("SwapHead(old 1) with no head: %v, want ErrConflict", err)
	}
	must(t, s.SwapHead(ctx, "acme", 0, h1))
	if err := s.SwapHead(ctx, "acme", 0, h1); !errors.Is(err, auditlog.ErrConflict) {
		t.Fatalf("SwapHead(old 0) over a head: %v, want ErrConflict", err)
	}
	h2 := auditlog.Head{Seq: 2, Hash: "h2", RequestID: "req-2", Receipt: Receipt("acme", "req-2")}
	if err := s.SwapHead(ctx, "acme", 2, h2); !errors.Is(err, auditlog.ErrConflict) {
		t.Fatalf("SwapHead(old 2) over seq 1: %v, want ErrConflict", err)
	}
	must(t, s.SwapHead(ctx, "acme", 1, h2))
	got, err := s.Head(ctx, "acme")
	must(t, err)
	if !sameJSON(got, h2) {
		t.Fatalf("Head = %s, want %s", js(got), js(h2))
	}
	if got, _ := s.Head(ctx, "globex"); got.Seq != 0 {
		t.Errorf("another tenant's head is %d, want 0", got.Seq)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func js(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%+v", v)
	}
	return string(b)
}

func sameJSON(a, b any) bool { return js(a) == js(b) }
