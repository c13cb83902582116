package aggregator_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/integrity"
	"github.com/lethe-erasure/lethe/pkg/retry"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

const (
	macSecret   = "deployment-mac-secret-0123456789abcdef"
	otherSecret = "someone-elses-secret-0123456789abcdef"
	chainSecret = "deployment-chain-secret-0123456789abcd"
)

func sign(t *testing.T, k *integrity.Ring, typ *event.Type, recs ...*kgo.Record) []*kgo.Record {
	t.Helper()
	for _, r := range recs {
		if err := integrity.Sign(k, typ, r); err != nil {
			t.Fatal(err)
		}
	}
	return recs
}

// refused asserts the aggregator refuses rec permanently.
func (e *env) refused(t *testing.T, what string, rec *kgo.Record) {
	t.Helper()
	err := e.agg.Handle(context.Background(), rec)
	if err == nil || !retry.IsPermanent(err) || !strings.Contains(err.Error(), "refused") {
		t.Errorf("%s: Handle = %v, want a permanent refusal", what, err)
	}
}

// With a MAC key, store reports that anyone could have produced (unsigned, signed with
// another key, or altered after signing) are refused and never counted: no receipt
// results, and the request's stored reports stay empty. The deleters' signed reports then
// complete the request.
func TestForgedReportsAreRefused(t *testing.T) {
	k := testenv.Ring(t, "mac1", macSecret)
	e := setup(t)
	e.agg.MAC = k
	e.handle(t, sign(t, k, event.Request, reqRec(t, request("er_1", "acme", 1)))...)

	altered := doneRecs(t, success("er_1", "acme", 1)...)
	sign(t, k, event.Done, altered...)
	for _, r := range altered {
		var d event.StoreDone
		if err := event.Done.Decode(r.Value, &d); err != nil {
			t.Fatal(err)
		}
		d.Attempt = 9
		b, err := event.Done.Encode(&d)
		if err != nil {
			t.Fatal(err)
		}
		r.Value = b
	}
	forged := map[string][]*kgo.Record{
		"unsigned":  doneRecs(t, success("er_1", "acme", 1)...),
		"other key": sign(t, testenv.Ring(t, "mac1", otherSecret), event.Done, doneRecs(t, success("er_1", "acme", 1)...)...),
		"altered":   altered,
		"as a find": sign(t, k, event.Found, doneRecs(t, success("er_1", "acme", 1)...)...),
	}
	for name, recs := range forged {
		for _, r := range recs {
			e.refused(t, name+" report", r)
		}
	}
	if _, err := e.store.GetReceipt(context.Background(), "er_1"); !errors.Is(err, auditlog.ErrNotFound) {
		t.Fatalf("a receipt after forged reports: %v", err)
	}
	if ds, err := e.store.Reports(context.Background(), "er_1"); err != nil || len(ds) != 0 {
		t.Fatalf("stored reports after forged ones: %+v, %v; want none", ds, err)
	}
	if n := len(published(t, e.addrs)); n != 0 {
		t.Fatalf("%d receipts published after forged reports", n)
	}

	e.handle(t, sign(t, k, event.Done, doneRecs(t, success("er_1", "acme", 1)...)...)...)
	if rc, err := e.store.GetReceipt(context.Background(), "er_1"); err != nil || rc.Status != event.ReceiptComplete {
		t.Fatalf("receipt after the signed reports: %+v, %v", rc, err)
	}
}

// A forged request can change neither what a stored request expects nor its due date, and
// a forged find counts nothing.
func TestForgedRequestsAndFindsAreRefused(t *testing.T) {
	k := testenv.Ring(t, "mac1", macSecret)
	e := setup(t)
	e.agg.MAC = k
	e.refused(t, "unsigned request", reqRec(t, request("er_1", "acme", 1)))
	if _, err := e.store.GetRequest(context.Background(), "er_1"); !errors.Is(err, auditlog.ErrNotFound) {
		t.Fatalf("an unsigned request was stored: %v", err)
	}
	e.handle(t, sign(t, k, event.Request, reqRec(t, request("er_1", "acme", 1)))...)
	fewer := request("er_1", "acme", 2)
	fewer.ExpectedStores = []string{"audit_log"}
	e.refused(t, "forged re-drive expecting fewer stores", reqRec(t, fewer))
	if r, err := e.store.GetRequest(context.Background(), "er_1"); err != nil || len(r.ExpectedStores) != 3 || r.Attempt != 1 {
		t.Fatalf("stored request after a forged re-drive: %+v, %v", r, err)
	}
	e.refused(t, "unsigned find", foundRec(t, event.StoreFound{RequestID: "er_1", TenantID: "acme", Store: "redis", Kind: "redis", Attempt: 1,
		Locations: []event.LocationCount{{Location: "a", Deleted: 1000}}, FoundAt: clock, Run: "run-1"}))
	if ds, err := e.store.Reports(context.Background(), "er_1"); err != nil || len(ds) != 0 {
		t.Fatalf("stored reports after a forged find: %+v, %v; want none", ds, err)
	}
}

// The re-drives the aggregator publishes (sweeps, re-applies) are signed, so deleters
// accept them.
func TestRedriveIsSigned(t *testing.T) {
	k := testenv.Ring(t, "mac1", macSecret)
	e := setup(t)
	e.agg.MAC = k
	req := auditlog.RequestOf(&event.Requested{RequestID: "er_1", TenantID: "acme", Scope: event.ScopeSubject, ExpectedStores: expected,
		Sealed: &event.SealedIdentifiers{KEKID: "kek1", Nonce: []byte("nonce"), Ciphertext: []byte("ciphertext")}})
	if err := e.agg.Redrive(context.Background(), req, event.PurposeSweep, "sweep-1", nil); err != nil {
		t.Fatal(err)
	}
	recs := testenv.ReadTopic(t, e.addrs, event.TopicRequested)
	if len(recs) != 1 {
		t.Fatalf("%d re-drives, want 1", len(recs))
	}
	if err := integrity.Verify(k, event.Request, recs[0]); err != nil {
		t.Errorf("re-drive: %v", err)
	}
}

// With a chain key, the receipt carries a chain MAC that verifies, on erasure.completed
// as in the audit table, and the tenant's chain passes keyed verification.
func TestReceiptCarriesChainMAC(t *testing.T) {
	k := testenv.Ring(t, "chain1", chainSecret)
	e := setup(t)
	e.agg.ChainKey = k
	e.handle(t, reqRec(t, request("er_1", "acme", 1)))
	e.handle(t, doneRecs(t, success("er_1", "acme", 1)...)...)
	rc, err := e.store.GetReceipt(context.Background(), "er_1")
	if err != nil {
		t.Fatal(err)
	}
	if rc.ChainKeyID != "chain1" || auditlog.CheckChainMAC(k, rc.ChainKeyID, rc.ChainMAC, rc.Hash) != nil {
		t.Errorf("stored receipt: chain MAC %q under %q does not verify", rc.ChainMAC, rc.ChainKeyID)
	}
	pub := published(t, e.addrs)
	if len(pub) != 1 || pub[0].ChainMAC != rc.ChainMAC || pub[0].ChainKeyID != rc.ChainKeyID {
		t.Errorf("published receipts %+v: want the stored one with its chain MAC", pub)
	}
	if v, err := (auditlog.Chain{Store: e.store, Key: k}).Verify(context.Background(), "acme"); err != nil || v.Keyed != 1 {
		t.Errorf("keyed verification: %+v, %v", v, err)
	}
}

// A chain whose head fails its MAC (here linked under another secret with the same key
// id, as a forger would) is never extended: the report that completes the request is
// refused permanently, so it is dead-lettered with the reason, and no receipt is issued.
func TestForgedChainHeadStopsReceipts(t *testing.T) {
	k := testenv.Ring(t, "chain1", chainSecret)
	e := setup(t)
	e.agg.ChainKey = k
	forged := auditlog.Chain{Store: e.store, Key: testenv.Ring(t, "chain1", otherSecret)}
	if _, err := forged.Issue(context.Background(), event.Receipt{ReceiptID: "rc_0", RequestID: "er_0", TenantID: "acme", Status: event.ReceiptComplete}); err != nil {
		t.Fatal(err)
	}
	recs := append([]*kgo.Record{reqRec(t, request("er_1", "acme", 1))}, doneRecs(t, success("er_1", "acme", 1)...)...)
	e.handle(t, recs[:len(recs)-1]...)
	err := e.agg.Handle(context.Background(), recs[len(recs)-1])
	if !errors.Is(err, auditlog.ErrChainBroken) || !retry.IsPermanent(err) {
		t.Fatalf("completing report after a forged head: %v, want a permanent ErrChainBroken", err)
	}
	if _, err := e.store.GetReceipt(context.Background(), "er_1"); !errors.Is(err, auditlog.ErrNotFound) {
		t.Errorf("a receipt linked after a forged head: %v", err)
	}
}
