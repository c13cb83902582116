package aggregator_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/envelope"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

// A dry run's counts never make a receipt, however complete; the confirmed erasure (a
// higher attempt) replaces them and is receipted.
func TestDryRunIssuesNoReceipt(t *testing.T) {
	e := setup(t)
	req := request("er_dry", "acme", 1)
	req.DryRun = true
	counts := success("er_dry", "acme", 1)
	for i := range counts {
		counts[i].DryRun = true
	}
	e.handle(t, append([]*kgo.Record{reqRec(t, req)}, doneRecs(t, counts...)...)...)
	if _, err := e.store.GetReceipt(context.Background(), "er_dry"); err == nil {
		t.Fatal("a dry run was receipted")
	}
	real := request("er_dry", "acme", 2)
	e.handle(t, append([]*kgo.Record{reqRec(t, real)}, doneRecs(t, success("er_dry", "acme", 2)...)...)...)
	rc := checkReceipts(t, e, "acme", []string{"er_dry"})
	if rc[0].Status != event.ReceiptComplete {
		t.Errorf("receipt status %s", rc[0].Status)
	}
}

// PARTIAL: a store reported EXEMPT under a legal hold makes a PARTIAL receipt that lists
// it with the hold's basis. Crashes of the aggregator in PARTIAL (every record handled
// again by a restarted aggregator) publish it once and keep the identifiers key, which
// the re-drive after the hold's release needs; once the held store reports, the key is
// shredded and the receipt stays the one receipt of the request.
func TestPartialReceiptSurvivesRestarts(t *testing.T) {
	e := setup(t)
	e.agg.Sealer = testenv.Sealer(t)
	ctx := context.Background()
	req := request("er_held", "acme", 1)
	req.Exempt = []event.Exemption{{Store: "redis", HoldID: "hold_1", LegalBasis: "GDPR Art. 17(3)(e)"}}
	sealed, err := e.agg.Sealer.SealIdentifiers(ctx, req.RequestID, req.Identifiers)
	if err != nil {
		t.Fatal(err)
	}
	req.Sealed, req.Identifiers = sealed, event.Identifiers{SessionIDs: []string{}}
	reports := success("er_held", "acme", 1)
	reports[1] = done("er_held", "acme", "redis", event.StatusExempt, 1)
	reports[1].Verification.Method = "legal hold: GDPR Art. 17(3)(e) (hold hold_1)"
	recs := append([]*kgo.Record{reqRec(t, req)}, doneRecs(t, reports...)...)
	for i := range restarts + 1 {
		if err := replay(e.restart(), recs); err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
	}
	rc := checkReceipts(t, e, "acme", []string{"er_held"})
	if rc[0].Status != event.ReceiptPartial {
		t.Fatalf("receipt status %s, want PARTIAL", rc[0].Status)
	}
	if ev := rc[0].Stores[1]; ev.Store != "redis" || ev.Status != event.StatusExempt || !strings.Contains(ev.Verification.Method, "GDPR Art. 17(3)(e)") {
		t.Errorf("held store's evidence %+v", ev)
	}
	if n := publications(t, e)["er_held"]; n != 1 {
		t.Errorf("published %d times, want once", n)
	}
	if _, err := e.agg.Sealer.Identifiers(ctx, &req); err != nil {
		t.Fatalf("identifiers key of a PARTIAL request: %v, want kept", err)
	}
	redrive := request("er_held", "acme", 2, "redis")
	e.handle(t, append([]*kgo.Record{reqRec(t, redrive)}, doneRecs(t, done("er_held", "acme", "redis", event.StatusDeleted, 2))...)...)
	if _, err := e.agg.Sealer.Identifiers(ctx, &req); !errors.Is(err, envelope.ErrShredded) {
		t.Errorf("identifiers key after the held store reported: %v, want shredded", err)
	}
	checkReceipts(t, e, "acme", []string{"er_held"})
}

// A pass after a PARTIAL receipt (a sweep) exempts the held stores again: it never erases
// what a hold keeps.
func TestSweepKeepsHeldStoresExempt(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	req := request("er_sweep_held", "acme", 1)
	req.Exempt = []event.Exemption{{Store: "redis", HoldID: "hold_9", LegalBasis: "GDPR Art. 17(3)(e)"}}
	reports := success("er_sweep_held", "acme", 1)
	reports[1] = done("er_sweep_held", "acme", "redis", event.StatusExempt, 1)
	reports[1].Verification.Method = "legal hold: GDPR Art. 17(3)(e) (hold hold_9)"
	e.handle(t, append([]*kgo.Record{reqRec(t, req)}, doneRecs(t, reports...)...)...)
	stored, err := e.store.GetRequest(ctx, "er_sweep_held")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.agg.Redrive(ctx, stored, event.PurposeSweep, "sweep-1", nil); err != nil {
		t.Fatal(err)
	}
	var sweep *event.Requested
	for _, r := range testenv.ReadTopic(t, e.addrs, event.TopicRequested) {
		var ev event.Requested
		if err := event.Request.Decode(r.Value, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Purpose == event.PurposeSweep {
			sweep = &ev
		}
	}
	if sweep == nil {
		t.Fatal("no sweep published")
	}
	if ex, held := sweep.ExemptionOf("redis"); !held || ex.HoldID != "hold_9" || ex.LegalBasis != "GDPR Art. 17(3)(e)" || len(sweep.Exempt) != 1 {
		t.Errorf("sweep exemptions %+v", sweep.Exempt)
	}
}
