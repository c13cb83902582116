// Package aggregator joins the per-store reports of each request into its receipt.
//
// It consumes erasure.requested and erasure.store.done, records both in the audit table
// and, when every expected store has reported success with nothing remaining and nothing
// unexamined, issues exactly one receipt (auditlog.Issue) and publishes it on
// erasure.completed.
//
// Handling is idempotent. A publication mark written after the broker's acknowledgement
// keeps a receipt from being published again; a crash between the two can publish it a
// second time, with the same receipt_id, so consumers de-duplicate by receipt_id.
//
// With Sweeps or Retain set, the receipt schedules re-verification sweeps, the shredding
// of the identifiers' key and each store's physical-erasure date; what they find becomes
// addenda chained after the receipt. With MAC set, unsigned records are refused.
//
// Details: docs/delivery-guarantees.md.
package aggregator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/envelope"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/integrity"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/keylock"
	"github.com/lethe-erasure/lethe/pkg/metrics"
	"github.com/lethe-erasure/lethe/pkg/retry"
	"github.com/lethe-erasure/lethe/pkg/schemareg"
	"github.com/lethe-erasure/lethe/pkg/worker"
)

// AuditLog is what the aggregator keeps in the audit table: requests, reports and the
// receipt chain, the receipts' addenda, the schedule of sweeps, publication marks and the
// suppression list. auditlog.DirStore and the DynamoDB store (auditlog/dynamo) implement it.
type AuditLog interface {
	auditlog.Store
	auditlog.Addenda
	auditlog.Scheduler
	auditlog.PublishMarker
	auditlog.SuppressionStore
}

// Awaiter is an optional capability of an AuditLog, found by type assertion: Awaiting says
// cheaply, without reading reports, whether requestID cannot complete yet (it is not
// stored, or an expected store has no report). The aggregator asks before it reads a
// request's state: of the records one erasure brings, all but the last find it waiting.
// DirStore answers from memory; the DynamoDB store would pay the read it saves, so it does
// not implement it.
type Awaiter interface {
	Awaiting(ctx context.Context, requestID string) (bool, error)
}

// Aggregator turns store reports into receipts.
type Aggregator struct {
	Store          AuditLog
	Producer       worker.Producer
	RequestedTopic string // default event.TopicRequested
	CompletedTopic string // default event.TopicCompleted
	FoundTopic     string // default event.TopicStoreFound
	Log            *zap.Logger
	Metrics        *metrics.Metrics // nil records nothing
	Sealer         *envelope.Sealer // destroys the request's identifiers key after the receipt; nil: none
	// Registry frames every record the aggregator writes (receipts, suppressions,
	// re-drives, reappeared) as each topic's framing says (schemareg.Codec.EncodeFor);
	// nil: single-object encoding.
	Registry *schemareg.Codec
	// Inventory, when set, is the inventory the deleters serve: a request expecting a store
	// it does not list would never complete, so it is dead-lettered with the reason.
	Inventory *inventory.Inventory
	// Sweeps are the delays after a receipt at which every store of the request is
	// verified again (DefaultSweeps in the services); none: no sweeps. Retain is how long
	// the request's data key is kept after the last sweep (DefaultRetain in the services),
	// so that re-applying the erasure after a restore can still find the subject. With
	// either set (and a store that keeps a schedule and addenda), the key is destroyed at
	// the end of the retention, not at the receipt, and the receipt says when.
	Sweeps          []time.Duration
	Retain          time.Duration
	ReappearedTopic string // default event.TopicReappeared
	Now             func() time.Time

	// SuppressionsTopic carries the suppression list's entries; default
	// event.TopicSuppressions. Used only when Store is an auditlog.SuppressionStore.
	SuppressionsTopic string

	// MAC authenticates the records the aggregator reads and signs the requests it
	// re-drives (package integrity); nil: nothing is checked or signed.
	MAC *integrity.Ring
	// ChainKey MACs every receipt and addendum linked into a tenant's chain
	// (auditlog.Chain); nil: they are chained by SHA-256 alone.
	ChainKey *integrity.Ring

	// Reread is how long after its last record an open request its view cannot complete
	// is read again, with a Store that is an auditlog.ReportLog; zero: FirstReread.
	Reread time.Duration

	open *openView // with a Store that is an auditlog.ReportLog; see view
}

// Handle is the consumer.Handler for erasure.requested and erasure.store.done.
func (a *Aggregator) Handle(ctx context.Context, rec *kgo.Record) error {
	if err := a.authentic(rec); err != nil {
		return err
	}
	var requestID string
	if rec.Topic == or(a.RequestedTopic, event.TopicRequested) {
		var req event.Requested
		if err := event.Request.Decode(rec.Value, &req); err != nil {
			return err
		}
		if err := validRequest(&req); err != nil {
			return err
		}
		if req.Purpose == event.PurposeReview {
			return a.reviewed(ctx, &req)
		}
		if event.AfterReceipt(req.Purpose) {
			return nil // a sweep's or re-apply's re-drive: its reports become addenda
		}
		if a.Inventory != nil {
			for _, st := range req.ExpectedStores {
				if _, ok := a.Inventory.Entry(st); !ok {
					return retry.Permanent(fmt.Errorf("aggregator: request expects store %q, which inventory %s does not list: no deleter serves it", st, a.Inventory.Version))
				}
			}
		}
		r := auditlog.RequestOf(&req)
		if err := a.lookFirst(ctx, r.RequestID); err != nil {
			return err
		}
		if err := a.Store.PutRequest(ctx, r); err != nil {
			return fmt.Errorf("aggregator: record request: %w", err)
		}
		if _, ok := a.Store.(auditlog.ReportLog); ok && !a.view().request(r, a.now()) {
			return nil
		}
		requestID = req.RequestID
	} else {
		var d event.StoreDone
		if rec.Topic == or(a.FoundTopic, event.TopicStoreFound) {
			var f event.StoreFound
			if err := event.Found.Decode(rec.Value, &f); err != nil {
				return err
			}
			d = FoundReport(f)
		} else if err := event.Done.Decode(rec.Value, &d); err != nil {
			return err
		}
		if d.RequestID == "" || d.Store == "" {
			return retry.Permanent(errors.New("aggregator: store report without request_id or store"))
		}
		if event.AfterReceipt(d.Purpose) {
			return a.passReport(ctx, d)
		}
		if IsFound(d) {
			// Kept beside the store's report, never in its place: the report may be
			// written concurrently (another partition, another process), and Build merges
			// the two.
			d.Store += FoundSuffix
		}
		if rl, ok := a.Store.(auditlog.ReportLog); ok {
			if err := a.lookFirst(ctx, d.RequestID); err != nil {
				return err
			}
			if err := rl.AppendReport(ctx, d, rec.Offset); err != nil {
				return fmt.Errorf("aggregator: record report: %w", err)
			}
		} else if err := a.putReport(ctx, d); err != nil {
			return err
		}
		if err := a.released(ctx, d); err != nil {
			return err
		}
		if _, ok := a.Store.(auditlog.ReportLog); ok && !a.view().report(d, a.now()) {
			return nil
		}
		// A find completes too: the store's report may be waiting for it (Build), and a
		// report stored concurrently either sees this find or is seen by complete, which
		// reads after the write.
		requestID = d.RequestID
	}
	return a.complete(ctx, requestID)
}

// authentic checks the MAC of rec when the aggregator has a MAC key.
func (a *Aggregator) authentic(rec *kgo.Record) error {
	if a.MAC == nil {
		return nil
	}
	t := event.Done
	switch rec.Topic {
	case or(a.RequestedTopic, event.TopicRequested):
		t = event.Request
	case or(a.FoundTopic, event.TopicStoreFound):
		t = event.Found
	}
	if err := integrity.Verify(a.MAC, t, rec); err != nil {
		return retry.Permanent(fmt.Errorf("aggregator: %s record refused: %w", t.Name(), err))
	}
	return nil
}

// putReport stores d, merged (Merge) with the report stored for its request and store if
// there is one: a report is created with one conditional write, and only one that finds a
// report stored (a redelivery, a second run) reads it to merge.
func (a *Aggregator) putReport(ctx context.Context, d event.StoreDone) error {
	err := a.Store.CreateReport(ctx, d)
	if !errors.Is(err, auditlog.ErrExists) {
		if err != nil {
			return fmt.Errorf("aggregator: record report: %w", err)
		}
		return nil
	}
	prev, err := a.Store.Reports(ctx, d.RequestID)
	if err != nil {
		return fmt.Errorf("aggregator: load reports: %w", err)
	}
	for _, p := range prev {
		if p.Store == d.Store {
			d = Merge(p, d)
		}
	}
	if err := a.Store.PutReport(ctx, d); err != nil {
		return fmt.Errorf("aggregator: record report: %w", err)
	}
	return nil
}

// Merge is auditlog.MergeReports: the report to keep when next arrives for a store that
// already reported prev.
func Merge(prev, next event.StoreDone) event.StoreDone { return auditlog.MergeReports(prev, next) }

// FoundReport is f as a stored report: no status (so no receipt counts it as a
// success), not verified, with f's counts and run. Merge folds it into the store's report.
func FoundReport(f event.StoreFound) event.StoreDone {
	d := event.StoreDone{
		RequestID: f.RequestID, TenantID: f.TenantID, Store: f.Store, Kind: f.Kind,
		Attempt: f.Attempt, Locations: f.Locations, StartedAt: f.FoundAt, FinishedAt: f.FoundAt,
		Verification: event.Verification{Method: "not verified", Remaining: -1},
	}
	if f.Run != "" {
		d.FoundRuns = []string{f.Run}
	}
	return d
}

// awaitsFind reports whether report d names a run whose find (f, the merged finds
// stored for its store) has not been read yet. The finds of one request share its key and
// partition and are read in order, so once the find of d's own run is merged, so is the
// find of every run before it — that of a run that erased and crashed before its report
// included.
func awaitsFind(d, f event.StoreDone) bool {
	for _, run := range d.FoundRuns {
		if !slices.Contains(f.FoundRuns, run) {
			return true
		}
	}
	return false
}

// FoundSuffix is appended to a store's name to store its find (FoundReport) beside its
// report; Build merges the two, and readers that iterate the expected stores ignore it.
const FoundSuffix = "#found"

// IsFound reports whether d is a FoundReport no store report has replaced yet.
func IsFound(d event.StoreDone) bool { return auditlog.IsFound(d) }

func validRequest(r *event.Requested) error {
	if r.RequestID == "" || r.TenantID == "" || len(r.ExpectedStores) == 0 {
		return retry.Permanent(errors.New("aggregator: request without request_id, tenant_id or expected stores"))
	}
	return nil
}

// completing serializes, within the process, the completion of one request across
// Aggregator values: a request's record and its last report arrive on different topics
// (different partitions, handled concurrently), and both must not find the receipt
// unpublished and publish it. Only the records of one request wait for each other: a
// completion holds its lock through fsyncs and the broker's acknowledgements, and locks
// shared by unrelated requests queued thousands of records behind a few completions
// (seconds at 350 erasures/s on the embedded stack).
var completing keylock.Locks

// chaining serializes, within the process, the links into one tenant's chain (receipts,
// addenda): linkers of one process would only contend for the tenant's head, each lost
// round costing three reads and a conditional write. Processes still race, which the
// head's conditional swap settles. Taken after a request's completion lock, never before.
var chaining keylock.Locks

// issue is auditlog.Issue under the tenant's chain lock, unless the store links receipts
// itself (auditlog.Linker), where a tenant's receipts share fsyncs when linked together.
func (a *Aggregator) issue(ctx context.Context, r event.Receipt) (event.Receipt, error) {
	if _, ok := a.Store.(auditlog.Linker); !ok {
		defer chaining.Lock(r.TenantID)()
	}
	return a.chain().Issue(ctx, r)
}

// appendAddendum is auditlog.Append under the tenant's chain lock.
func (a *Aggregator) appendAddendum(ctx context.Context, ad auditlog.Addendum) (auditlog.Addendum, bool, error) {
	defer chaining.Lock(ad.TenantID)()
	return a.chain().Append(ctx, ad)
}

// chain links into the audit table's chains with the chain key.
func (a *Aggregator) chain() auditlog.Chain {
	return auditlog.Chain{Store: a.Store, Key: a.ChainKey, Heads: &a.view().heads, Unkeyed: func(tenant string, seq int64) {
		a.log().Warn("linking after a chain head that carries no chain MAC: linked before chain keys, or its MAC was removed; the chain is keyed from here",
			zap.String("tenant", tenant), zap.Int64("head_seq", seq))
	}}
}

// complete issues and publishes the receipt of requestID if every expected store succeeded
// and the receipt is not marked published yet; it marks it published after the broker's
// acknowledgement.
func (a *Aggregator) complete(ctx context.Context, requestID string) error {
	defer completing.Lock(requestID)()
	if aw, ok := a.Store.(Awaiter); ok {
		// A report written concurrently, after this check, completes the request itself.
		if waiting, err := aw.Awaiting(ctx, requestID); err != nil || waiting {
			return err
		}
	}
	st, err := a.Store.RequestState(ctx, requestID)
	if errors.Is(err, auditlog.ErrNotFound) {
		return nil // reports came before the request; its own record completes it
	}
	if err != nil {
		return fmt.Errorf("aggregator: load request state: %w", err)
	}
	req := st.Request
	r, ok := Build(req, st.Reports, a.now())
	if !ok {
		return nil // not complete yet; a published request still builds (Merge keeps its successes)
	}
	if st.Published {
		if err := a.shredUnlessHeld(ctx, requestID); err != nil { // again: a crash may have come between mark and shred
			return err
		}
		a.published(requestID)
		return nil
	}
	r = a.withRetention(req, r)
	issued, err := a.issue(ctx, r)
	if err != nil {
		return fmt.Errorf("aggregator: issue receipt: %w", err)
	}
	if err := a.suppress(ctx, req, issued); err != nil {
		return err
	}
	if a.retains(req) && issued.IdentifiersShredAt != nil {
		if err := a.schedule(ctx, issued); err != nil {
			return err
		}
	}
	topic := or(a.CompletedTopic, event.TopicCompleted)
	out, err := a.Registry.Record(topic, event.Completed, []byte(requestID), &issued)
	if err != nil {
		return fmt.Errorf("aggregator: encode receipt: %w", err)
	}
	if err := a.Producer.ProduceSync(ctx, out).FirstErr(); err != nil {
		return fmt.Errorf("aggregator: publish receipt: %w", err)
	}
	if err := a.Store.MarkPublished(ctx, requestID, issued.ReceiptID); err != nil {
		return fmt.Errorf("aggregator: mark receipt published: %w", err)
	}
	if issued.IdentifiersShredAt == nil {
		if err := a.shredUnlessHeld(ctx, requestID); err != nil {
			return err
		}
	}
	a.published(requestID)
	if issued.ReceiptID == r.ReceiptID {
		m := metrics.Or(a.Metrics)
		m.Receipts.WithLabelValues(req.TenantID).Inc()
		m.ErasureDuration.Observe(issued.CompletedAt.Sub(issued.RequestedAt).Seconds())
		a.log().Info("receipt issued", zap.String("request_id", requestID), zap.String("tenant", req.TenantID),
			zap.String("subject_hash", req.SubjectHash), zap.Int64("seq", issued.Seq), zap.Int64("elapsed_ms", issued.ElapsedMS))
	}
	return nil
}

// shredUnlessRetained shreds the request's data key unless its receipt keeps it until a
// later date (the schedule shreds it then).
func (a *Aggregator) shredUnlessRetained(ctx context.Context, requestID string) error {
	if a.Sealer == nil {
		return nil
	}
	rc, err := a.Store.GetReceipt(ctx, requestID)
	if err != nil && !errors.Is(err, auditlog.ErrNotFound) {
		return fmt.Errorf("aggregator: load receipt: %w", err)
	}
	if err == nil && rc.IdentifiersShredAt != nil {
		return nil
	}
	return a.shred(ctx, requestID)
}

// shred destroys the data key of the request's sealed identifiers (crypto-shredding:
// erasure.requested keeps them, unreadable now). It is idempotent; without a Sealer it does
// nothing.
func (a *Aggregator) shred(ctx context.Context, requestID string) error {
	if a.Sealer == nil {
		return nil
	}
	if err := a.Sealer.Shred(ctx, requestID); err != nil {
		return fmt.Errorf("aggregator: shred identifiers key: %w", err)
	}
	return nil
}

// Build returns the receipt of req when every expected store has a successful report that
// names its kind and verified nothing remaining, or reported EXEMPT under a legal hold (the
// receipt is then PARTIAL); ok is false otherwise, and always while a report is a dry
// run's count. A store's find, stored under its name and FoundSuffix, is merged into its
// report (Merge); a report that names a find not merged yet (awaitsFind) is not ready.
// A report whose probe found the subject outside the inventory, or could not read a
// location there (event.Verification.Outside), holds the receipt back: the request is
// INCOMPLETE until the inventory covers the location and a re-drive erases it. A kind's
// findings are those of its latest attempt: a re-drive of any store of the kind, run once
// discovery no longer reports the location (or probing it clean), supersedes them, and the
// receipt leaves superseded findings out. Each store's similar items are listed again at
// the receipt's top level, for review. The rule is the same for every kind: what a status means for a kind is its deleter's to
// decide (the audit verifier, for one, reports FAILED when it finds personal data). Stores
// appear in the order of ExpectedStores.
func Build(req auditlog.Request, reports []event.StoreDone, now time.Time) (r event.Receipt, ok bool) {
	byStore := map[string]event.StoreDone{}
	finds := map[string]event.StoreDone{}
	for _, d := range reports {
		if name, ok := strings.CutSuffix(d.Store, FoundSuffix); ok {
			d.Store = name
			finds[name] = d
			continue
		}
		byStore[d.Store] = d
	}
	latest := map[string]int{} // the highest attempt reported per kind
	for _, d := range byStore {
		latest[d.Kind] = max(latest[d.Kind], d.Attempt)
	}
	awaiting := map[string]bool{}
	for name, d := range byStore {
		f, ok := finds[name]
		awaiting[name] = awaitsFind(d, f)
		if ok {
			byStore[name] = Merge(d, f)
		}
	}
	r = event.Receipt{
		ReceiptID:        uuid.NewString(),
		RequestID:        req.RequestID,
		TenantID:         req.TenantID,
		SubjectHash:      req.SubjectHash,
		KeyID:            req.KeyID,
		Scope:            req.Scope,
		Regulation:       req.Regulation,
		RequestedAt:      req.RequestedAt,
		CompletedAt:      now,
		DueAt:            req.DueAt,
		ElapsedMS:        now.Sub(req.RequestedAt).Milliseconds(),
		InventoryVersion: req.InventoryVersion,
		Status:           event.ReceiptComplete,
	}
	for _, name := range req.ExpectedStores {
		d, found := byStore[name]
		if found && d.Kind != "" && !d.DryRun && d.Status == event.StatusExempt {
			r.Status = event.ReceiptPartial // held: listed with the hold's basis, nothing erased
		} else if !found || d.Kind == "" || d.DryRun || !d.Status.Succeeded() || !d.Verification.Clean() || awaiting[name] {
			return event.Receipt{}, false
		}
		if d.Verification.Outside() {
			if d.Attempt == latest[d.Kind] {
				return event.Receipt{}, false
			}
			d.Verification.OutsideInventory = nil // superseded by a later attempt of its kind
		}
		r.Stores = append(r.Stores, event.StoreEvidence{
			Store: d.Store, Kind: d.Kind, Status: d.Status, Deleted: d.Deleted(),
			Locations: d.Locations, Verification: d.Verification, Physical: d.Physical,
		})
		for _, id := range d.Verification.Similar {
			r.Review = append(r.Review, event.ReviewItem{Store: d.Store, Kind: event.ReviewSimilar, Item: id})
		}
	}
	return r, true
}

func (a *Aggregator) log() *zap.Logger {
	if a.Log == nil {
		return zap.NewNop()
	}
	return a.Log
}

func (a *Aggregator) now() time.Time {
	if a.Now == nil {
		return time.Now().UTC()
	}
	return a.Now()
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
