package replay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/lethe-erasure/lethe/pkg/aggregator"
	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/event"
)

// Kind classifies a finding.
type Kind string

// Finding kinds.
const (
	// KindReceiptMismatch: the stored receipt differs from the one its request's reports
	// justify (every field except receipt_id, completed_at, elapsed_ms, seq, prev_hash and
	// hash is compared).
	KindReceiptMismatch Kind = "receipt_mismatch"
	// KindReceiptUnjustified: a receipt is stored, but the reports do not show every
	// expected store verified clean.
	KindReceiptUnjustified Kind = "receipt_unjustified"
	// KindPublishedMismatch: a receipt published on erasure.completed does not carry the
	// stored receipt's hash, or the stored receipt no longer matches its own hash.
	KindPublishedMismatch Kind = "published_mismatch"
	// KindNotPublished: a receipt is stored for a request with events, but none was
	// published (the aggregator publishes it again when the request's last record is
	// redelivered; lasting, it is lost evidence).
	KindNotPublished Kind = "receipt_not_published"
	// KindNotStored: a receipt was published, but none is stored.
	KindNotStored Kind = "receipt_not_stored"
	// KindDuplicateReceipt: different receipts (receipt ids or hashes) were published for
	// one request.
	KindDuplicateReceipt Kind = "duplicate_receipt"
	// KindStuck: every expected store reported clean, but no receipt was stored or published.
	KindStuck Kind = "stuck"
	// KindNoEvents: a receipt is stored for a request of which no event was read.
	KindNoEvents Kind = "receipt_without_events"
	// KindRequestMissing: reports or receipts were read for a request whose
	// erasure.requested record was not (expired from the topic, or never published).
	KindRequestMissing Kind = "request_missing"
	// KindChainBroken: auditlog.VerifyChain failed for the tenant.
	KindChainBroken Kind = "chain_broken"
	// KindChainPending: the tenant's newest receipt is linked but not yet written
	// (auditlog.ErrChainPending); the next receipt issued for the tenant completes it.
	KindChainPending Kind = "chain_pending"
	// KindStoreError: the audit table could not be read; the check it was for is missing.
	KindStoreError Kind = "store_error"
)

// Finding is one discrepancy. It holds ids, never a raw identifier.
type Finding struct {
	RequestID string `json:"request_id,omitempty"`
	TenantID  string `json:"tenant_id,omitempty"`
	Kind      Kind   `json:"kind"`
	Detail    string `json:"detail"`
}

// Report is the outcome of Compare.
type Report struct {
	Requests    int       `json:"requests"`    // requests rebuilt from the topics
	Complete    int       `json:"complete"`    // of those, complete per their reports
	Published   int       `json:"published"`   // distinct receipts read on erasure.completed
	Stored      int       `json:"stored"`      // receipts stored for the tenants checked
	Tenants     int       `json:"tenants"`     // tenants whose receipt chain was verified
	Undecodable int       `json:"undecodable"` // records of the trail that did not decode
	Findings    []Finding `json:"findings"`
}

// OK reports whether the audit table agrees with the trail: no finding.
func (r Report) OK() bool { return len(r.Findings) == 0 }

// Count returns the number of findings of kind k.
func (r Report) Count(k Kind) int {
	n := 0
	for _, f := range r.Findings {
		if f.Kind == k {
			n++
		}
	}
	return n
}

// Compare checks the audit table against the trail and reports every discrepancy. It only
// reads the store. The tenants checked are those of the trail and of the stored requests
// (auditlog.Store.ListRequests); for each, every stored receipt must have events in the
// trail and auditlog.VerifyChain must pass. For each rebuilt request, the stored receipt
// must be the one aggregator.Build makes of the request and its latest reports, and carry
// the hash of every receipt published for it; a request complete per its reports must
// have a receipt. Store errors become KindStoreError findings. Findings are ordered by
// request id, then the tenants' in tenant order.
func Compare(ctx context.Context, trail *Trail, store auditlog.Store) Report {
	rep := Report{Undecodable: trail.TotalUndecodable(), Findings: []Finding{}}
	tenants := map[string]bool{}
	for _, id := range trail.IDs() {
		rb := trail.Requests[id]
		if rb.TenantID != "" {
			tenants[rb.TenantID] = true
		}
		rep.Requests++
		rep.Published += len(rb.Published)
		rep.checkRequest(ctx, rb, store)
	}
	stored, err := store.ListRequests(ctx, "")
	if err != nil {
		rep.add(Finding{Kind: KindStoreError, Detail: fmt.Sprintf("list stored requests: %v", err)})
	}
	for _, r := range stored {
		if r.TenantID != "" {
			tenants[r.TenantID] = true
		}
	}
	names := make([]string, 0, len(tenants))
	for t := range tenants {
		names = append(names, t)
	}
	sort.Strings(names)
	for _, tenant := range names {
		rep.checkTenant(ctx, trail, store, tenant)
	}
	rep.Tenants = len(names)
	return rep
}

func (rep *Report) add(f Finding) { rep.Findings = append(rep.Findings, f) }

// checkRequest compares one rebuilt request with the store.
func (rep *Report) checkRequest(ctx context.Context, rb *Rebuilt, store auditlog.Store) {
	find := func(k Kind, format string, args ...any) {
		rep.add(Finding{RequestID: rb.RequestID, TenantID: rb.TenantID, Kind: k, Detail: fmt.Sprintf(format, args...)})
	}
	stored, err := store.GetReceipt(ctx, rb.RequestID)
	hasStored := err == nil
	if err != nil && !errors.Is(err, auditlog.ErrNotFound) {
		find(KindStoreError, "read receipt: %v", err)
		return
	}
	var (
		rebuilt   event.Receipt
		justified bool
	)
	if rb.Request == nil {
		find(KindRequestMissing, "%d reports and %d published receipts, but no erasure.requested record", len(rb.Reports), len(rb.Published))
	} else {
		completedAt := time.Now().UTC()
		switch {
		case hasStored:
			completedAt = stored.CompletedAt
		case len(rb.Published) > 0:
			completedAt = rb.Published[0].CompletedAt
		}
		rebuilt, justified = aggregator.Build(*rb.Request, rb.ReportList(), completedAt)
		if justified {
			rep.Complete++
		}
	}
	switch {
	case hasStored && rb.Request != nil && !justified:
		find(KindReceiptUnjustified, "a receipt is stored, but the latest reports do not show every expected store (%s) verified clean", strings.Join(rb.Request.ExpectedStores, ", "))
	case hasStored && justified:
		if diff := receiptDiff(rebuilt, stored); len(diff) > 0 && !restsOnAnEarlierState(rb, stored) {
			find(KindReceiptMismatch, "the stored receipt differs from the one the reports justify in %s", strings.Join(diff, ", "))
		}
	case !hasStored && len(rb.Published) > 0:
		find(KindNotStored, "%d receipts published, none stored", len(rb.Published))
	case !hasStored && justified:
		find(KindStuck, "every expected store reported clean, but no receipt was issued")
	}
	if len(rb.Published) > 1 {
		ids := make([]string, 0, len(rb.Published))
		for _, p := range rb.Published {
			ids = append(ids, fmt.Sprintf("receipt %s seq %d hash %.12s", p.ReceiptID, p.Seq, p.Hash))
		}
		find(KindDuplicateReceipt, "%d different receipts published: %s", len(rb.Published), strings.Join(ids, "; "))
	}
	if !hasStored {
		return
	}
	if len(rb.Published) == 0 {
		find(KindNotPublished, "receipt %s (seq %d) is stored but was never published", stored.ReceiptID, stored.Seq)
	}
	body := auditlog.HashReceipt(stored)
	for _, p := range rb.Published {
		switch {
		case p.Hash != stored.Hash:
			find(KindPublishedMismatch, "published receipt %s (seq %d) has hash %.12s, the stored receipt %.12s", p.ReceiptID, p.Seq, p.Hash, stored.Hash)
		case p.Hash != body:
			find(KindPublishedMismatch, "the stored receipt's content no longer hashes to the published hash %.12s (tampered)", p.Hash)
		}
	}
}

// checkTenant checks the tenant's stored receipts and chain.
func (rep *Report) checkTenant(ctx context.Context, trail *Trail, store auditlog.Store, tenant string) {
	rs, err := store.Receipts(ctx, tenant)
	if err != nil {
		rep.add(Finding{TenantID: tenant, Kind: KindStoreError, Detail: fmt.Sprintf("list receipts: %v", err)})
	}
	rep.Stored += len(rs)
	for _, r := range rs {
		if trail.Requests[r.RequestID] == nil {
			rep.add(Finding{RequestID: r.RequestID, TenantID: tenant, Kind: KindNoEvents,
				Detail: fmt.Sprintf("receipt %s (seq %d) is stored, but no event of its request was read", r.ReceiptID, r.Seq)})
		}
	}
	switch err := auditlog.VerifyChain(ctx, store, tenant); {
	case err == nil:
	case errors.Is(err, auditlog.ErrChainPending):
		rep.add(Finding{TenantID: tenant, Kind: KindChainPending, Detail: err.Error()})
	case errors.Is(err, auditlog.ErrChainBroken):
		rep.add(Finding{TenantID: tenant, Kind: KindChainBroken, Detail: err.Error()})
	default:
		rep.add(Finding{TenantID: tenant, Kind: KindStoreError, Detail: err.Error()})
	}
}

// receiptDiff names the fields in which got differs from want, ignoring receipt_id,
// completed_at, elapsed_ms, seq, prev_hash and hash. Times compare at millisecond
// precision (the receipt's).
func receiptDiff(want, got event.Receipt) []string {
	var diff []string
	field := func(name string, same bool) {
		if !same {
			diff = append(diff, name)
		}
	}
	ms := func(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }
	field("request_id", want.RequestID == got.RequestID)
	field("tenant_id", want.TenantID == got.TenantID)
	field("subject_hash", want.SubjectHash == got.SubjectHash)
	field("key_id", want.KeyID == got.KeyID)
	field("scope", want.Scope == got.Scope)
	field("regulation", want.Regulation == got.Regulation)
	field("requested_at", ms(want.RequestedAt).Equal(ms(got.RequestedAt)))
	field("due_at", ms(want.DueAt).Equal(ms(got.DueAt)))
	field("inventory_version", want.InventoryVersion == got.InventoryVersion)
	if len(want.Stores) != len(got.Stores) {
		field("stores", false)
	} else {
		for i := range want.Stores {
			field("stores["+want.Stores[i].Store+"]", sameEvidence(want.Stores[i], got.Stores[i]))
		}
	}
	field("audit_log_pii", want.AuditLogPII == got.AuditLogPII)
	field("status", want.Status == got.Status)
	return diff
}

// sameEvidence compares two stores' evidence; nil and empty lists are equal.
func sameEvidence(a, b event.StoreEvidence) bool {
	return a.Store == b.Store && a.Kind == b.Kind && a.Status == b.Status && a.Deleted == b.Deleted &&
		sameVerification(a.Verification, b.Verification) && a.Physical == b.Physical &&
		slices.Equal(a.Locations, b.Locations)
}

// sameVerification compares two verifications; nil and empty lists are equal.
func sameVerification(a, b event.Verification) bool {
	sameTime := (a.DiscoveryRunAt == nil) == (b.DiscoveryRunAt == nil) &&
		(a.DiscoveryRunAt == nil || a.DiscoveryRunAt.Truncate(time.Millisecond).Equal(b.DiscoveryRunAt.Truncate(time.Millisecond)))
	return a.Method == b.Method && a.Remaining == b.Remaining && a.Unexamined == b.Unexamined &&
		slices.Equal(a.UnexaminedItems, b.UnexaminedItems) && slices.Equal(a.Excluded, b.Excluded) &&
		a.Attestation == b.Attestation && a.Mentions == b.Mentions && slices.Equal(a.Similar, b.Similar) &&
		sameTime && a.DiscoveryUncovered == b.DiscoveryUncovered
}

// restsOnAnEarlierState reports whether stored is the receipt the aggregator justified from
// what it had read when it issued it: a twin of the request's latest record (the same
// attempt published again, with its own requested_at) and the reports of the runs that had
// finished by then (a redelivered record's run after the receipt changes the reports, never
// the receipt), or of the records it had handled by then: the aggregator handles a
// request's records of each topic in order, so what it had read is a first part of its
// store.done records with a first part of its store.found records (it may lag behind a run
// that finished before the receipt).
func restsOnAnEarlierState(rb *Rebuilt, stored event.Receipt) bool {
	reports := append([][]event.StoreDone{rb.ReportList(), rb.ReportsUntil(stored.CompletedAt)}, rb.handledStates()...)
	for _, req := range append([]auditlog.Request{*rb.Request}, rb.Twins...) {
		for _, ds := range reports {
			if r, ok := aggregator.Build(req, ds, stored.CompletedAt); ok && len(receiptDiff(r, stored)) == 0 {
				return true
			}
		}
	}
	return false
}
