package auditlog_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/auditlog/auditlogtest"
	"github.com/lethe-erasure/lethe/pkg/event"
)

// goldenChain links a tenant's chain as the aggregator does: a receipt linked before
// chain keys existed, then, under the chain key chain1, receipts of hash formats 2, 3 and
// 4 with an addendum of the first receipt between them, and last a review decision on the
// last receipt (an addendum of v 2). It returns the records in chain order.
func goldenChain(t *testing.T) []any {
	t.Helper()
	ctx := context.Background()
	dir := openDir(t)
	k := chainRing(t, "chain1", map[string]string{"chain1": chainSecret1})
	g := goldenReceipts()
	var out []any
	r1, err := auditlog.Issue(ctx, dir, g["receipt_v1"])
	must(t, err)
	out = append(out, r1)
	c := auditlog.Chain{Store: dir, Key: k}
	r2, err := c.Issue(ctx, g["receipt_v2"])
	must(t, err)
	out = append(out, r2)
	a, _, err := c.Append(ctx, auditlogtest.Addendum("req-golden/sweep-1", auditlog.AddendumReverified, r1.ReceiptID, r1.RequestID, "acme"))
	must(t, err)
	out = append(out, a)
	var r4 event.Receipt
	for _, name := range []string{"receipt_v3", "receipt_v4"} {
		r4, err = c.Issue(ctx, g[name])
		must(t, err)
		out = append(out, r4)
	}
	reviewed := auditlogtest.Addendum("req-golden-4/review/rv-1", auditlog.AddendumReviewed, r4.ReceiptID, r4.RequestID, "acme")
	reviewed.Purpose, reviewed.Pass, reviewed.Stores = "REVIEW", "rv-1", nil
	item := r4.Review[0]
	reviewed.Review = &event.ReviewDecision{Store: item.Store, Kind: item.Kind, Item: item.Item, Decision: event.ReviewDismiss, Reason: "another customer's order <2>"}
	a2, _, err := c.Append(ctx, reviewed)
	must(t, err)
	out = append(out, a2)
	v, err := c.Verify(ctx, "acme")
	if err != nil || v.Records != 6 || v.LastUnkeyed != 1 {
		t.Fatalf("golden chain: %+v, %v; want 6 records, unkeyed up to seq 1", v, err)
	}
	return out
}

// TestGoldenChain pins a whole chain of receipts and an addendum, keyed from its second
// record on (testdata/chain_acme.json, key testdata/chain1.key), which the Python client
// (clients/python) verifies with an implementation of its own: hashes, links, seq and
// chain MACs.
func TestGoldenChain(t *testing.T) {
	b, err := json.MarshalIndent(map[string]any{"tenant_id": "acme", "records": goldenChain(t)}, "", "  ")
	must(t, err)
	b = append(b, '\n')
	path := filepath.Join("testdata", "chain_acme.json")
	if *update {
		must(t, os.WriteFile(path, b, 0o644))
	}
	want, err := os.ReadFile(path)
	must(t, err)
	if string(want) != string(b) {
		t.Errorf("%s differs from the chain linked now: the canonical form or the linking changed (run with -update only if intended)", path)
	}
}
