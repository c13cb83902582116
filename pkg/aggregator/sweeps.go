package aggregator

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/envconf"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/integrity"
	"github.com/lethe-erasure/lethe/pkg/metrics"
	"github.com/lethe-erasure/lethe/pkg/retry"
)

// DefaultSweeps are the delays after a receipt at which every store of the request is
// verified again (LETHE_SWEEPS).
var DefaultSweeps = []time.Duration{time.Minute, time.Hour, 24 * time.Hour, 7 * 24 * time.Hour}

// DefaultRetain is how long the data key of a request is kept after its last sweep
// (LETHE_RETAIN): the 35 days of DynamoDB's point-in-time recovery and of common backup
// schedules, so that an erasure can be re-applied to a store restored from any backup
// still kept.
const DefaultRetain = 35 * 24 * time.Hour

// sweepBatch is how many due tasks one read of the schedule returns.
const sweepBatch = 500

// retains reports whether the request's identifiers are kept sealed after the receipt for
// sweeps and re-applies: sweeps or a retention are configured and the request's
// identifiers are sealed (clear identifiers are never kept).
func (a *Aggregator) retains(req auditlog.Request) bool {
	return a.Sealer != nil && req.Sealed != nil && (len(a.Sweeps) > 0 || a.Retain > 0)
}

// withRetention adds to r, the receipt of req completed at r.CompletedAt, when its
// identifiers will be shredded and each store's physical-erasure date.
func (a *Aggregator) withRetention(req auditlog.Request, r event.Receipt) event.Receipt {
	if !a.retains(req) {
		return r
	}
	var last time.Duration
	for _, d := range a.Sweeps {
		last = max(last, d)
	}
	shred := r.CompletedAt.Add(last + a.Retain)
	r.IdentifiersShredAt = &shred
	for i, s := range r.Stores {
		if a.Inventory == nil {
			break
		}
		if st, ok := a.Inventory.Entry(s.Store); ok && st.PhysicalWithin > 0 {
			due := r.CompletedAt.Add(st.PhysicalWithin)
			r.Stores[i].PhysicalErasureDue = &due
		}
	}
	return r
}

// schedule writes the tasks of an issued receipt that keeps its identifiers: one per sweep,
// the shredding, and each store's physical-erasure date. Task ids are fixed per request,
// so writing them again (a redelivered record before the receipt was marked published)
// replaces them with the same tasks.
func (a *Aggregator) schedule(ctx context.Context, rc event.Receipt) error {
	base := auditlog.Task{RequestID: rc.RequestID, TenantID: rc.TenantID, ReceiptID: rc.ReceiptID}
	var tasks []auditlog.Task
	for i, d := range a.Sweeps {
		t := base
		t.ID, t.Kind, t.Due, t.N = fmt.Sprintf("%s/sweep-%d", rc.RequestID, i+1), auditlog.TaskSweep, rc.CompletedAt.Add(d), i+1
		tasks = append(tasks, t)
	}
	if rc.IdentifiersShredAt != nil {
		t := base
		t.ID, t.Kind, t.Due = rc.RequestID+"/shred", auditlog.TaskShred, *rc.IdentifiersShredAt
		tasks = append(tasks, t)
	}
	for _, s := range rc.Stores {
		if s.PhysicalErasureDue != nil {
			t := base
			t.ID, t.Kind, t.Due, t.Store = rc.RequestID+"/physical/"+s.Store, auditlog.TaskPhysical, *s.PhysicalErasureDue, s.Store
			t.Within = s.PhysicalErasureDue.Sub(rc.CompletedAt)
			tasks = append(tasks, t)
		}
	}
	if err := a.Store.Schedule(ctx, tasks...); err != nil {
		return fmt.Errorf("aggregator: schedule the receipt's tasks: %w", err)
	}
	return nil
}

// Run runs Tick every interval (a minute when zero) until ctx ends. A failed tick is
// logged and retried at the next one; tasks stay scheduled until they are done, so a tick
// missed while the process was down is caught up by the next.
func (a *Aggregator) Run(ctx context.Context, interval time.Duration) error {
	if interval <= 0 {
		interval = time.Minute
	}
	if _, ok := a.Store.(auditlog.ReportLog); ok {
		go a.runRereads(ctx, time.Second)
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := a.Tick(ctx); err != nil && ctx.Err() == nil {
			a.log().Warn("schedule tick failed", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Tick runs every task due now: it publishes each due sweep as a re-drive of its request
// marked PurposeSweep, destroys the data keys whose retention ended (appending SHREDDED),
// and marks stores physically erased whose date passed (PHYSICAL). Each task is removed
// from the schedule after its effect, so a crash runs it again (every effect is
// idempotent). It reads the schedule by due time and, per task, only that task's request:
// its cost is proportional to the tasks due. It returns how many tasks it ran.
func (a *Aggregator) Tick(ctx context.Context) (int, error) {
	now := a.now()
	ran := 0
	for {
		due, err := a.Store.Due(ctx, now, sweepBatch)
		if err != nil {
			return ran, fmt.Errorf("aggregator: read schedule: %w", err)
		}
		for _, t := range due {
			if err := a.run(ctx, t, now); err != nil {
				return ran, err
			}
			ran++
		}
		if len(due) < sweepBatch {
			return ran, nil
		}
	}
}

func (a *Aggregator) run(ctx context.Context, t auditlog.Task, now time.Time) error {
	var err error
	switch t.Kind {
	case auditlog.TaskSweep:
		err = a.sweep(ctx, t)
	case auditlog.TaskShred:
		err = a.shredRetained(ctx, t, now)
	case auditlog.TaskPhysical:
		var moved bool
		if moved, err = a.physical(ctx, t, now); moved {
			return err // rescheduled, not done
		}
	default:
		a.log().Error("unknown task kind dropped from the schedule", zap.String("kind", t.Kind), zap.String("request_id", t.RequestID))
	}
	if err != nil {
		return err
	}
	if err := a.Store.Unschedule(ctx, t); err != nil {
		return fmt.Errorf("aggregator: unschedule %s: %w", t.Kind, err)
	}
	return nil
}

// sweep publishes the re-drive of t's request for sweep t.N to every expected store.
func (a *Aggregator) sweep(ctx context.Context, t auditlog.Task) error {
	req, err := a.Store.GetRequest(ctx, t.RequestID)
	if errors.Is(err, auditlog.ErrNotFound) {
		a.log().Error("sweep of an unknown request dropped", zap.String("request_id", t.RequestID))
		return nil
	}
	if err != nil {
		return fmt.Errorf("aggregator: sweep: load request: %w", err)
	}
	return a.Redrive(ctx, req, event.PurposeSweep, fmt.Sprintf("sweep-%d", t.N), nil)
}

// Redrive publishes req on erasure.requested again with its sealed identifiers, marked
// with purpose and pass, for only (nil: every expected store). Deleters erase and verify
// as for the erasure; the aggregator records their reports as addenda.
func (a *Aggregator) Redrive(ctx context.Context, req auditlog.Request, purpose, pass string, only []string) error {
	ev := RedriveEvent(req, purpose, pass, only)
	topic := or(a.RequestedTopic, event.TopicRequested)
	b, err := a.Registry.EncodeFor(topic, event.Request, &ev)
	if err != nil {
		return fmt.Errorf("aggregator: encode re-drive: %w", err)
	}
	rec := &kgo.Record{Topic: topic, Key: []byte(req.RequestID), Value: b}
	if a.MAC != nil {
		if err := integrity.Sign(a.MAC, event.Request, rec); err != nil {
			return fmt.Errorf("aggregator: sign re-drive: %w", err)
		}
	}
	if err := a.Producer.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return fmt.Errorf("aggregator: publish re-drive: %w", err)
	}
	a.log().Info("re-drive published", zap.String("request_id", req.RequestID), zap.String("tenant", req.TenantID),
		zap.String("purpose", purpose), zap.String("pass", pass))
	return nil
}

// RedriveEvent is the erasure.requested record of a pass after the receipt of req.
func RedriveEvent(req auditlog.Request, purpose, pass string, only []string) event.Requested {
	return event.Requested{
		RequestID: req.RequestID, TenantID: req.TenantID, SubjectHash: req.SubjectHash, KeyID: req.KeyID,
		Identifiers: event.Identifiers{SessionIDs: []string{}}, Sealed: req.Sealed,
		Scope: req.Scope, Regulation: req.Regulation, RequestedAt: req.RequestedAt, DueAt: req.DueAt,
		InventoryVersion: req.InventoryVersion, ExpectedStores: req.ExpectedStores,
		OnlyStores: append([]string{}, only...), Attempt: req.Attempt, Purpose: purpose, Pass: pass,
		SessionHashes: append([]string{}, req.SessionHashes...),
		Exempt:        append([]event.Exemption{}, req.Exempt...), // a pass never erases what a hold keeps
	}
}

// shredRetained destroys the request's data key at the end of its retention and appends
// SHREDDED.
func (a *Aggregator) shredRetained(ctx context.Context, t auditlog.Task, now time.Time) error {
	if err := a.shred(ctx, t.RequestID); err != nil {
		return err
	}
	return a.addendum(ctx, auditlog.Addendum{
		AddendumID: t.RequestID + "/shredded", ReceiptID: t.ReceiptID, RequestID: t.RequestID, TenantID: t.TenantID,
		Type: auditlog.AddendumShredded, At: now, Stores: []auditlog.AddendumStore{},
	})
}

// physical appends PHYSICAL for t's store unless the store's data reappeared or the
// erasure was re-applied to it (a restore) since the receipt; then the date moves to that
// event plus the store's physical_within, and moved is true.
func (a *Aggregator) physical(ctx context.Context, t auditlog.Task, now time.Time) (moved bool, err error) {
	ads, err := a.Store.AddendaOf(ctx, t.RequestID)
	if err != nil {
		return false, fmt.Errorf("aggregator: physical erasure: load addenda: %w", err)
	}
	var since time.Time
	for _, ad := range ads {
		for _, s := range ad.Stores {
			if s.Store == t.Store && (ad.Purpose == event.PurposeReapply || ad.Type == auditlog.AddendumReappeared) && ad.At.After(since) {
				since = ad.At
			}
		}
	}
	if !since.IsZero() && since.Add(t.Within).After(now) {
		next := t
		next.Due = since.Add(t.Within)
		if err := a.Store.Schedule(ctx, next); err != nil {
			return true, fmt.Errorf("aggregator: physical erasure: reschedule: %w", err)
		}
		return true, nil
	}
	return false, a.addendum(ctx, auditlog.Addendum{
		AddendumID: t.RequestID + "/physical/" + t.Store, ReceiptID: t.ReceiptID, RequestID: t.RequestID, TenantID: t.TenantID,
		Type: auditlog.AddendumPhysical, At: now, Stores: []auditlog.AddendumStore{{Store: t.Store}},
	})
}

// addendum appends ad to its tenant's chain and counts it when this call linked it.
func (a *Aggregator) addendum(ctx context.Context, ad auditlog.Addendum) error {
	got, linked, err := a.appendAddendum(ctx, ad)
	if err != nil {
		return fmt.Errorf("aggregator: append addendum: %w", err)
	}
	if linked {
		metrics.Or(a.Metrics).Addenda.WithLabelValues(got.Type).Inc()
		a.log().Info("addendum appended", zap.String("request_id", got.RequestID), zap.String("tenant", got.TenantID),
			zap.String("type", got.Type), zap.String("pass", got.Pass), zap.Int64("seq", got.Seq))
	}
	return nil
}

// passReport records the report of a sweep or re-apply as an addendum of the request's
// receipt: REAPPEARED (and erasure.reappeared) when the store deleted something, else
// REVERIFIED, or UNVERIFIED when the store could not prove itself clean. One addendum per
// (request, pass, store); a redelivered report links nothing new.
func (a *Aggregator) passReport(ctx context.Context, d event.StoreDone) error {
	rc, err := a.Store.GetReceipt(ctx, d.RequestID)
	if errors.Is(err, auditlog.ErrNotFound) {
		a.log().Warn("report of a pass after the receipt for a request without receipt ignored",
			zap.String("request_id", d.RequestID), zap.String("store", d.Store), zap.String("pass", d.Pass))
		return nil
	}
	if err != nil {
		return fmt.Errorf("aggregator: pass report: load receipt: %w", err)
	}
	typ := auditlog.AddendumReverified
	switch {
	case !d.Status.Succeeded() || !d.Verification.Clean():
		typ = auditlog.AddendumUnverified
	case d.Purpose == event.PurposeReview:
		typ = auditlog.AddendumItemErased
	case d.Deleted() > 0:
		typ = auditlog.AddendumReappeared
	}
	ad := auditlog.Addendum{
		AddendumID: d.RequestID + "/" + d.Pass + "/" + d.Store, ReceiptID: rc.ReceiptID, RequestID: d.RequestID, TenantID: rc.TenantID,
		Type: typ, Purpose: d.Purpose, Pass: d.Pass, At: or2(d.FinishedAt, a.now()),
		Stores: []auditlog.AddendumStore{{Store: d.Store, Status: string(d.Status), Deleted: d.Deleted(),
			Remaining: d.Verification.Remaining, Unexamined: d.Verification.Unexamined}},
	}
	if d.Purpose == event.PurposeReview {
		// The item's erasure follows its decision in the chain, and names the item.
		dec, err := a.Store.GetAddendum(ctx, reviewID(d.RequestID, d.Pass))
		if err != nil {
			return fmt.Errorf("aggregator: the report of review %s precedes its decision's addendum: %w", d.Pass, err)
		}
		ad.Review = dec.Review
	}
	switch _, err := a.Store.GetAddendum(ctx, ad.AddendumID); {
	case err == nil:
		return nil // handled before: its event was published then
	case !errors.Is(err, auditlog.ErrNotFound):
		return fmt.Errorf("aggregator: pass report: read addendum: %w", err)
	}
	if typ == auditlog.AddendumReappeared {
		if err := a.publishReappeared(ctx, d); err != nil {
			return err
		}
	}
	got, linked, err := a.appendAddendum(ctx, ad)
	if err != nil {
		return fmt.Errorf("aggregator: append addendum: %w", err)
	}
	if !linked {
		return nil
	}
	m := metrics.Or(a.Metrics)
	m.Addenda.WithLabelValues(got.Type).Inc()
	log := a.log().With(zap.String("request_id", d.RequestID), zap.String("tenant", rc.TenantID), zap.String("subject_hash", rc.SubjectHash),
		zap.String("store", d.Store), zap.String("pass", d.Pass), zap.Int64("seq", got.Seq))
	switch typ {
	case auditlog.AddendumReappeared:
		m.Reappeared.WithLabelValues(d.Store, d.Kind, d.Purpose).Inc()
		log.Warn("erased data reappeared and was erased again", zap.Int64("deleted", d.Deleted()))
	case auditlog.AddendumItemErased:
		log.Info("reviewed item erased", zap.Int64("deleted", d.Deleted()))
	case auditlog.AddendumUnverified:
		log.Error("re-verification could not prove the store clean", zap.String("status", string(d.Status)),
			zap.Int64("remaining", d.Verification.Remaining), zap.Int64("unexamined", d.Verification.Unexamined))
	default:
		log.Info("store re-verified clean")
	}
	return nil
}

// released records, as a RELEASED addendum of the receipt, the report of a re-drive for a
// store the receipt lists EXEMPT: the erasure that followed a hold's release. Only reports
// of a later attempt can be one, so other reports cost nothing. One addendum per
// (request, store, attempt).
func (a *Aggregator) released(ctx context.Context, d event.StoreDone) error {
	if d.Attempt < 2 || IsFound(d) || d.Status == event.StatusExempt {
		return nil
	}
	rc, err := a.Store.GetReceipt(ctx, d.RequestID)
	if errors.Is(err, auditlog.ErrNotFound) {
		return nil // no receipt yet: the report joins it
	}
	if err != nil {
		return fmt.Errorf("aggregator: load receipt: %w", err)
	}
	held := false
	for _, s := range rc.Stores {
		held = held || s.Store == d.Store && s.Status == event.StatusExempt
	}
	if !held {
		return nil
	}
	ad := auditlog.Addendum{
		AddendumID: fmt.Sprintf("%s/released/%s/%d", d.RequestID, d.Store, d.Attempt), ReceiptID: rc.ReceiptID,
		RequestID: d.RequestID, TenantID: rc.TenantID, Type: auditlog.AddendumReleased, At: or2(d.FinishedAt, a.now()),
		Stores: []auditlog.AddendumStore{{Store: d.Store, Status: string(d.Status), Deleted: d.Deleted(),
			Remaining: d.Verification.Remaining, Unexamined: d.Verification.Unexamined}},
	}
	got, linked, err := a.appendAddendum(ctx, ad)
	if err != nil {
		return fmt.Errorf("aggregator: append addendum: %w", err)
	}
	if linked {
		metrics.Or(a.Metrics).Addenda.WithLabelValues(got.Type).Inc()
		a.log().Info("store erased after its legal hold was released", zap.String("request_id", d.RequestID),
			zap.String("store", d.Store), zap.String("status", string(d.Status)), zap.Int64("seq", got.Seq))
	}
	return nil
}

// publishReappeared publishes erasure.reappeared for a pass report that deleted data,
// before its addendum is appended: a report handled again before the addendum exists
// publishes it again, so consumers de-duplicate by (request_id, pass, store).
func (a *Aggregator) publishReappeared(ctx context.Context, d event.StoreDone) error {
	ev := event.Reappeared{
		RequestID: d.RequestID, TenantID: d.TenantID, Store: d.Store, Kind: d.Kind, Purpose: d.Purpose, Pass: d.Pass,
		Deleted: d.Deleted(), Locations: append([]event.LocationCount{}, d.Locations...),
		Remaining: d.Verification.Remaining, At: or2(d.FinishedAt, a.now()),
	}
	topic := or(a.ReappearedTopic, event.TopicReappeared)
	rec, err := a.Registry.Record(topic, event.Reappear, []byte(d.RequestID), &ev)
	if err != nil {
		return fmt.Errorf("aggregator: encode reappeared: %w", err)
	}
	if err := a.Producer.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return fmt.Errorf("aggregator: publish reappeared: %w", err)
	}
	return nil
}

func or2(t, def time.Time) time.Time {
	if t.IsZero() {
		return def
	}
	return t
}

// Sweeps are re-verification delays as LETHE_SWEEPS writes them: a comma-separated list of
// positive durations (whole days with a d suffix), or off (none).
type Sweeps []time.Duration

// UnmarshalText reads a list of delays, or off or none.
func (s *Sweeps) UnmarshalText(b []byte) error {
	v := strings.TrimSpace(string(b))
	if v == "off" || v == "none" {
		*s = nil
		return nil
	}
	var out Sweeps
	for _, f := range strings.Split(v, ",") {
		d, err := parseDays(strings.TrimSpace(f))
		if err != nil || d <= 0 {
			return fmt.Errorf("%q is not a positive duration such as 1h or 7d", f)
		}
		out = append(out, d)
	}
	*s = out
	return nil
}

// MarshalText writes s as UnmarshalText reads it.
func (s Sweeps) MarshalText() ([]byte, error) {
	if len(s) == 0 {
		return []byte("off"), nil
	}
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = Days(d).String()
	}
	return []byte(strings.Join(parts, ",")), nil
}

// Days is a duration that is also written as a whole number of days ("35d").
type Days time.Duration

// UnmarshalText reads a duration of at least zero.
func (d *Days) UnmarshalText(b []byte) error {
	v, err := parseDays(strings.TrimSpace(string(b)))
	if err != nil || v < 0 {
		return fmt.Errorf("%q is not a duration such as 35d", b)
	}
	*d = Days(v)
	return nil
}

// MarshalText writes d as UnmarshalText reads it.
func (d Days) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// String writes d in whole days when it is at least two days long and divides into them.
func (d Days) String() string {
	const day = 24 * time.Hour
	if v := time.Duration(d); v >= 2*day && v%day == 0 {
		return strconv.Itoa(int(v/day)) + "d"
	}
	return envconf.FormatDuration(time.Duration(d))
}

// parseDays is time.ParseDuration that also takes a whole number of days ("35d").
func parseDays(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil {
			return 0, err
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	return time.ParseDuration(s)
}

// reviewID is the id of the REVIEWED addendum of a review decision.
func reviewID(requestID, pass string) string { return requestID + "/review/" + pass }

// reviewed records req's review decision as a REVIEWED addendum of its receipt; the
// report of an erase decision's store follows as ITEM_ERASED (passReport). A decision
// for a request without receipt is ignored.
func (a *Aggregator) reviewed(ctx context.Context, req *event.Requested) error {
	if req.Review == nil || req.Pass == "" {
		return retry.Permanent(errors.New("aggregator: review request without its decision or pass"))
	}
	rc, err := a.Store.GetReceipt(ctx, req.RequestID)
	if errors.Is(err, auditlog.ErrNotFound) {
		a.log().Warn("review decision for a request without receipt ignored", zap.String("request_id", req.RequestID), zap.String("pass", req.Pass))
		return nil
	}
	if err != nil {
		return fmt.Errorf("aggregator: review: load receipt: %w", err)
	}
	rv := *req.Review
	return a.addendum(ctx, auditlog.Addendum{
		AddendumID: reviewID(req.RequestID, req.Pass), ReceiptID: rc.ReceiptID, RequestID: req.RequestID, TenantID: rc.TenantID,
		Type: auditlog.AddendumReviewed, Purpose: event.PurposeReview, Pass: req.Pass, At: a.now(), Review: &rv,
	})
}
