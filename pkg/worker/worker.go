// Package worker is the runtime of a deleter service: it turns erasure.requested records
// into erasures of the inventory stores it serves and one erasure.store.done per store.
//
// For each request, the worker acts on every inventory store whose kind it serves and that
// the request expects (for a re-drive, only the selected ones), in parallel. Each store is
// erased and then verified by reading back; transient errors are retried with capped
// backoff within a budget, after which, as for permanent errors, the store reports FAILED
// with the reason. A report's counts sum every erase that succeeded, so a retry after a
// failed verification (which finds nothing left to erase) does not lose what the earlier
// try deleted. Before it erases a store whose deletion.Store is a deletion.Counter, the worker
// publishes what it counted there on erasure.store.found, nothing found included, and waits
// for the broker's acknowledgement; the store's report names that find. A deleter killed
// between its delete and its report is redelivered the request, finds nothing and reports
// NOTHING_FOUND, and the aggregator merges that report with the earlier find, which it
// has read by the time it has read the find the report names (one request's finds are
// read in order). Handle returns only after every erasure.store.done was acknowledged by
// the broker, so the consumer marks the request's offset after the side effects and their
// reports; a redelivered request erases again (a no-op) and reports again.
//
// Trust: with MAC set, a request must carry a valid MAC (integrity.Verify) or it is refused:
// a permanent error, so the consumer dead-letters it with the reason, and nothing is erased
// or reported, since nothing in an unauthenticated record can be believed, its request id
// included. Every report and find the worker publishes carries its own MAC. With Sealer set
// and AllowUnsealed false, a request that carries identifiers in the clear (every SUBJECT
// request without sealed identifiers) is refused as well: no store is touched, every store
// the worker acts on reports FAILED with ReasonUnsealed, so the request's status says why
// and no receipt can follow, and Handle returns a permanent error so that the record is
// dead-lettered. A TENANT request carries no identifiers; its MAC is what authenticates it.
//
// Sealed identifiers whose data key was shredded belong to a request that has its receipt
// (the key is destroyed only then): the record is an old one replayed, and Handle logs it
// and returns nil. A data key the key store holds neither as a key nor as a tombstone is a
// fault, never a completion: every store the worker acts on reports FAILED with
// ReasonMissingKey, and lethe_missing_data_keys_total counts the request.
package worker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/envelope"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/integrity"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/metrics"
	"github.com/lethe-erasure/lethe/pkg/pii"
	"github.com/lethe-erasure/lethe/pkg/retry"
	"github.com/lethe-erasure/lethe/pkg/schemareg"
)

// ReasonMissingKey is the error of the reports of a request whose data key is missing.
const ReasonMissingKey = "data key missing: misconfigured key store or lost key"

// ReasonUnsealed is the error of the reports of a request refused because its identifiers
// travel in the clear.
const ReasonUnsealed = "request refused: its identifiers are not sealed, and this deleter erases only sealed subject requests"

// Producer publishes records and waits for their acknowledgement (a *kgo.Client).
type Producer interface {
	ProduceSync(ctx context.Context, rs ...*kgo.Record) kgo.ProduceResults
}

// Worker erases data subjects from the inventory stores of the kinds in Stores.
type Worker struct {
	Inventory *inventory.Inventory
	Stores    map[string]deletion.Store // by inventory kind
	Producer  Producer
	DoneTopic string // default event.TopicStoreDone
	// FoundTopic carries what a Counter counted before each erase; default
	// event.TopicStoreFound.
	FoundTopic string
	Attempts   int           // tries per store before FAILED; default 5
	Backoff    retry.Backoff // between tries; default 200ms..2s, jittered: at least 1.5 s over the 5 tries
	Log        *zap.Logger
	Metrics    *metrics.Metrics // nil records nothing
	Sealer     *envelope.Sealer // opens sealed identifiers; nil: only clear ones are accepted
	// AllowUnsealed makes a worker with a Sealer accept requests whose identifiers travel in
	// the clear (development only; see Trust in the package comment).
	AllowUnsealed bool
	// MAC authenticates the requests the worker reads and signs the reports and finds it
	// writes (package integrity); nil: requests are not checked and records go unsigned.
	MAC *integrity.Ring
	// Registry frames the records the worker writes as each topic's framing says
	// (schemareg.Codec.EncodeFor); nil: single-object encoding.
	Registry *schemareg.Codec
	Now      func() time.Time
	// Batching gathers concurrent erasures of a deletion.BatchStore, and the data key
	// reads of concurrent sealed requests; the zero value erases one subject a call and
	// reads one key a call.
	Batching Batching
	// Discovery says when inventory discovery last ran over each kind's backend and how
	// many uncovered locations it found; every report's verification carries it, so a
	// receipt says how complete "complete" was. nil: no discovery runs.
	Discovery DiscoveryState

	batches batcher
}

// DiscoveryState is the last inventory discovery run of each kind (a discovery.Set): when
// it ran, how many locations it found outside the inventory, and those locations.
type DiscoveryState interface {
	LastRun(kind string) (at time.Time, uncovered int64, ok bool)
	Uncovered(kind string) []deletion.Uncovered
}

// Handle is the consumer.Handler for erasure.requested.
func (w *Worker) Handle(ctx context.Context, rec *kgo.Record) error {
	if w.MAC != nil {
		if err := integrity.Verify(w.MAC, event.Request, rec); err != nil {
			return retry.Permanent(fmt.Errorf("worker: request refused: %w", err))
		}
	}
	var req event.Requested
	if err := event.Request.Decode(rec.Value, &req); err != nil {
		return err // permanent: the consumer dead-letters it
	}
	if req.RequestID == "" || req.TenantID == "" {
		return retry.Permanent(errors.New("worker: request without request_id or tenant_id"))
	}
	stores := w.targets(&req)
	if len(stores) == 0 {
		return nil
	}
	if req.Purpose == event.PurposeReview {
		return w.review(ctx, &req, stores)
	}
	if w.Sealer != nil && !w.AllowUnsealed && inClear(&req) {
		return w.unsealed(ctx, &req, stores)
	}
	ids, err := w.identifiers(ctx, &req)
	if at, shredded := envelope.ShreddedAt(err); shredded {
		// The key is destroyed only once the receipt exists: an old record replayed.
		w.log().Info("identifiers shredded after the receipt, request already complete",
			zap.String("request_id", req.RequestID), zap.Time("shredded_at", at))
		return nil
	}
	if errors.Is(err, envelope.ErrMissing) {
		return w.missingKey(ctx, &req, stores)
	}
	if err != nil {
		return fmt.Errorf("worker: identifiers: %w", err)
	}
	subj := deletion.Subject{
		Tenant:   req.TenantID,
		ID:       ids.SubjectID,
		Hash:     req.SubjectHash,
		Sessions: ids.SessionIDs,
		Scope:    req.Scope,
	}
	reports := make([]event.StoreDone, len(stores))
	var wg sync.WaitGroup
	for i, st := range stores {
		wg.Go(func() {
			if ex, held := req.ExemptionOf(st.Name); held && !req.DryRun {
				reports[i] = w.exempt(&req, st, ex)
				return
			}
			if req.DryRun {
				reports[i] = w.count(ctx, &req, st, subj)
				return
			}
			reports[i] = w.erase(ctx, &req, st, subj)
		})
	}
	wg.Wait()
	w.probeOutside(ctx, &req, subj, reports)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return w.publish(ctx, reports)
}

// probeOutside adds to reports the probe, for subj, of the locations discovery last found
// outside the inventory over each kind's backend (deletion.Prober): once per kind, on the
// first report of the kind that succeeded and is not EXEMPT, a dry run's included. A probe
// that fails leaves every location unexamined. Sweeps and tenant-scope requests probe
// nothing.
func (w *Worker) probeOutside(ctx context.Context, req *event.Requested, subj deletion.Subject, reports []event.StoreDone) {
	if w.Discovery == nil || subj.TenantScope() || event.AfterReceipt(req.Purpose) {
		return
	}
	probed := map[string]bool{}
	for i := range reports {
		d := &reports[i]
		if probed[d.Kind] || !d.Status.Succeeded() {
			continue
		}
		probed[d.Kind] = true
		p, ok := w.Stores[d.Kind].(deletion.Prober)
		locs := w.Discovery.Uncovered(d.Kind)
		if !ok || len(locs) == 0 {
			continue
		}
		found, err := p.Probe(ctx, w.Inventory, locs, subj, deletion.DefaultProbeLimits)
		if err == nil && len(found) != len(locs) {
			err = fmt.Errorf("probe answered %d locations of %d", len(found), len(locs))
		}
		out := make([]event.OutsideLocation, len(locs))
		for j, l := range locs {
			out[j] = event.OutsideLocation{Location: l.Location, Suggest: l.Suggest}
			if err != nil {
				out[j].Unexamined = "probe failed: " + pii.Mask(err.Error())
				continue
			}
			out[j].Found, out[j].Unexamined = found[j].Found, found[j].Unexamined
		}
		d.Verification.OutsideInventory = out
		if err != nil {
			w.log().Warn("probe outside the inventory failed", zap.String("request_id", req.RequestID), zap.String("kind", d.Kind), zap.Error(err))
		}
	}
}

// inClear reports whether req carries identifiers in the clear: a request that is not
// TENANT scope and has no sealed identifiers, or any request with a clear identifier.
func inClear(req *event.Requested) bool {
	if req.Sealed != nil {
		return req.Identifiers.SubjectID != "" || len(req.Identifiers.SessionIDs) > 0
	}
	return req.Scope != event.ScopeTenant || req.Identifiers.SubjectID != "" || len(req.Identifiers.SessionIDs) > 0
}

// unsealed refuses req, whose identifiers travel in the clear: every store of it reports
// FAILED with ReasonUnsealed, and the error returned is permanent, so the record is
// dead-lettered once the reports are acknowledged.
func (w *Worker) unsealed(ctx context.Context, req *event.Requested, stores []inventory.Entry) error {
	w.log().Error("request refused: identifiers not sealed; only a request sealed by the intake is erased (LETHE_ALLOW_UNSEALED=true accepts clear ones, for development only)",
		zap.String("request_id", req.RequestID), zap.String("tenant", req.TenantID), zap.String("scope", string(req.Scope)))
	if err := w.failAll(ctx, req, stores, ReasonUnsealed); err != nil {
		return err
	}
	return retry.Permanent(errors.New("worker: " + ReasonUnsealed))
}

// missingKey reports every store of req FAILED with ReasonMissingKey.
func (w *Worker) missingKey(ctx context.Context, req *event.Requested, stores []inventory.Entry) error {
	metrics.Or(w.Metrics).MissingDataKeys.Inc()
	w.log().Error("data key missing: the key store holds neither the request's key nor its tombstone; check that every service uses the same key store (LETHE_KEYS_TABLE)",
		zap.String("request_id", req.RequestID), zap.String("tenant", req.TenantID), zap.String("subject_hash", req.SubjectHash))
	return w.failAll(ctx, req, stores, ReasonMissingKey)
}

// failAll reports every store of req FAILED with reason, not verified.
func (w *Worker) failAll(ctx context.Context, req *event.Requested, stores []inventory.Entry, reason string) error {
	m := metrics.Or(w.Metrics)
	now := w.now()
	reports := make([]event.StoreDone, len(stores))
	for i, st := range stores {
		reports[i] = event.StoreDone{
			RequestID: req.RequestID, TenantID: req.TenantID, Store: st.Name, Kind: st.Kind,
			Status: event.StatusFailed, Attempt: req.Attempt, StartedAt: now, FinishedAt: now,
			Error:        reason,
			Verification: event.Verification{Method: "not verified", Remaining: -1},
			Physical:     st.Physical, Locations: []event.LocationCount{},
			Purpose: req.Purpose, Pass: req.Pass,
		}
		m.StoreOutcomes.WithLabelValues(st.Name, st.Kind, string(event.StatusFailed)).Inc()
	}
	return w.publish(ctx, reports)
}

// publish sends the reports and waits for their acknowledgement.
func (w *Worker) publish(ctx context.Context, reports []event.StoreDone) error {
	recs := make([]*kgo.Record, len(reports))
	for i := range reports {
		b, err := w.Registry.EncodeFor(w.doneTopic(), event.Done, &reports[i])
		if err != nil {
			return fmt.Errorf("worker: encode store report: %w", err)
		}
		recs[i] = &kgo.Record{Topic: w.doneTopic(), Key: []byte(reports[i].RequestID), Value: b}
		if err := w.sign(event.Done, recs[i]); err != nil {
			return err
		}
	}
	if err := w.Producer.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("worker: publish store reports: %w", err)
	}
	return nil
}

// targets are the inventory stores this worker acts on for req.
func (w *Worker) targets(req *event.Requested) []inventory.Entry {
	var out []inventory.Entry
	for _, st := range w.Inventory.Stores {
		if _, ok := w.Stores[st.Kind]; ok && req.Acts(st.Name) {
			out = append(out, st)
		}
	}
	return out
}

// maxRaces bounds the Contended failures (lost races with a concurrent writer) one
// erasure retries at once before they count as failed tries.
const maxRaces = 16

// erase erases and verifies one store, retrying transient errors, and returns its report.
func (w *Worker) erase(ctx context.Context, req *event.Requested, st inventory.Entry, subj deletion.Subject) (done event.StoreDone) {
	impl := w.Stores[st.Kind]
	start := w.now()
	m := metrics.Or(w.Metrics)
	defer func() {
		m.StoreOutcomes.WithLabelValues(st.Name, st.Kind, string(done.Status)).Inc()
		m.StoreDuration.WithLabelValues(st.Name, st.Kind).Observe(done.FinishedAt.Sub(start).Seconds())
	}()
	log := w.log().With(zap.String("request_id", req.RequestID), zap.String("tenant", req.TenantID),
		zap.String("subject_hash", req.SubjectHash), zap.String("store", st.Name))
	done = event.StoreDone{
		RequestID: req.RequestID, TenantID: req.TenantID, Store: st.Name, Kind: st.Kind,
		Attempt: req.Attempt, StartedAt: start, Physical: st.Physical, Locations: []event.LocationCount{},
		Purpose: req.Purpose, Pass: req.Pass,
	}
	var res deletion.Result
	var ver event.Verification
	var err error
	// deleted sums what every successful Erase deleted: when a verification fails after
	// an erase, the retried erase finds nothing, but the report must count the first one.
	var deleted []event.LocationCount
	attempts := w.Attempts
	if attempts <= 0 {
		attempts = 5
	}
	counter, _ := impl.(deletion.Counter)
	// A pass after the receipt (a sweep) reports into an addendum, not a receipt: no find.
	recorded := counter == nil || event.AfterReceipt(req.Purpose)
	var found []event.LocationCount // what this run found and recorded before erasing
	run := ""                       // the id of this run's find, once recorded
	races := 0                      // Contended failures retried so far
	for try := 1; try <= attempts; try++ {
		err = nil
		if !recorded {
			run, found, err = w.recordFound(ctx, req, st, subj, counter)
			recorded = err == nil
		}
		if err == nil {
			res, err = w.eraseOne(ctx, impl, st, subj)
		}
		if err == nil {
			deleted = addCounts(deleted, res.Locations)
			ver, err = w.verifyOne(ctx, impl, st, subj)
		}
		if err == nil || retry.IsPermanent(err) || ctx.Err() != nil {
			break
		}
		failed, d := try, time.Duration(0)
		if retry.IsContended(err) && races < maxRaces {
			// lost a race with another writer (another instance rewriting the same object):
			// again after a few milliseconds, spending none of the store's tries
			races++
			try--
			d = retry.ContendedBackoff.Delay(races)
		} else if try == attempts {
			break
		} else {
			d = w.backoff().Delay(try)
		}
		m.StoreRetries.WithLabelValues(st.Name, st.Kind).Inc()
		log.Warn("store erase failed, retrying", zap.Int("attempt", failed), zap.Int("races", races), zap.Duration("backoff", d), zap.Error(err))
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
	}
	done.FinishedAt = w.now()
	defer w.stampDiscovery(st.Kind, &done.Verification)
	if err != nil {
		done.Status = event.StatusFailed
		done.Error = pii.Mask(err.Error())
		done.Verification = event.Verification{Method: "not verified", Remaining: -1}
		log.Error("store erase failed", zap.Bool("permanent", retry.IsPermanent(err)), zap.Error(err))
		return done
	}
	// What this run found is gone once the store verifies clean, deleted by this run or by
	// another one in between (a concurrent batch that deleted an older version holding the
	// subject's rows too): the report counts it, as the aggregator does when it merges a
	// find into a report (aggregator.Merge), so that the report alone carries it and the
	// receipt does not depend on the find being consumed first.
	if ver.Clean() {
		deleted = event.MaxCounts(deleted, found)
	}
	if run != "" {
		done.FoundRuns = []string{run}
	}
	res.Locations = deleted
	if deleted != nil {
		done.Locations = deleted
	}
	done.Verification = ver
	done.Status = deletion.StatusOf(res, ver)
	if done.Status == event.StatusFailed {
		done.Error = verificationError(ver)
	}
	log.Info("store erased", zap.String("status", string(done.Status)), zap.Int64("deleted", res.Deleted()),
		zap.Int64("remaining", ver.Remaining), zap.Int64("unexamined", ver.Unexamined),
		zap.Duration("took", done.FinishedAt.Sub(start)))
	return done
}

// stampDiscovery records on v the last discovery run over kind's backend, if any.
func (w *Worker) stampDiscovery(kind string, v *event.Verification) {
	if w.Discovery == nil {
		return
	}
	if at, n, ok := w.Discovery.LastRun(kind); ok {
		at = at.UTC()
		v.DiscoveryRunAt, v.DiscoveryUncovered = &at, n
	}
}

// recordFound publishes what counter counts of subj in st on the found topic, nothing found
// included, waits for the broker's acknowledgement and returns the find's run id and
// counts. The report names the run (StoreDone.FoundRuns): the finds of one request share
// its key, so the aggregator reads them in order, and one that has read the find a report
// names has read every earlier run's find too — including that of a run that erased and
// crashed before its report.
func (w *Worker) recordFound(ctx context.Context, req *event.Requested, st inventory.Entry, subj deletion.Subject, counter deletion.Counter) (string, []event.LocationCount, error) {
	locs, err := w.findOne(ctx, counter, st, subj)
	if err != nil {
		return "", nil, err
	}
	f := event.StoreFound{
		RequestID: req.RequestID, TenantID: req.TenantID, Store: st.Name, Kind: st.Kind,
		Attempt: req.Attempt, Locations: locs, FoundAt: w.now(), Run: uuid.NewString(),
	}
	topic := w.FoundTopic
	if topic == "" {
		topic = event.TopicStoreFound
	}
	b, err := w.Registry.EncodeFor(topic, event.Found, &f)
	if err != nil {
		return "", nil, fmt.Errorf("worker: encode what was found: %w", err)
	}
	rec := &kgo.Record{Topic: topic, Key: []byte(req.RequestID), Value: b}
	if err := w.sign(event.Found, rec); err != nil {
		return "", nil, err
	}
	if err := w.Producer.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return "", nil, fmt.Errorf("worker: publish what was found: %w", err)
	}
	return f.Run, locs, nil
}

// verificationError says why v does not prove the store clean, naming what went unexamined
// and where mentions were left (masked: item names come from the store).
func verificationError(v event.Verification) string {
	msg := fmt.Sprintf("verification found %d items remaining", v.Remaining)
	if v.Mentions != 0 {
		msg += fmt.Sprintf(", %d mentions of the subject's identifiers", v.Mentions)
	}
	if v.Unexamined != 0 {
		msg += fmt.Sprintf(", %d unexamined", v.Unexamined)
	}
	if v.Unexamined != 0 || v.Mentions != 0 {
		if len(v.UnexaminedItems) > 0 {
			const show = 5
			items := v.UnexaminedItems[:min(show, len(v.UnexaminedItems))]
			msg += " (" + strings.Join(items, "; ")
			if len(v.UnexaminedItems) > show {
				msg += fmt.Sprintf("; and %d more", len(v.UnexaminedItems)-show)
			}
			msg += ")"
		}
	}
	return pii.Mask(msg)
}

// addCounts adds the counts of add to sum, location by location, keeping first-seen order.
func addCounts(sum, add []event.LocationCount) []event.LocationCount {
	for _, l := range add {
		i := slices.IndexFunc(sum, func(s event.LocationCount) bool { return s.Location == l.Location })
		if i < 0 {
			sum = append(sum, l)
			continue
		}
		sum[i].Deleted += l.Deleted
	}
	return sum
}

// sign adds the MAC of rec, of type t, when the worker has a MAC key.
func (w *Worker) sign(t *event.Type, rec *kgo.Record) error {
	if w.MAC == nil {
		return nil
	}
	if err := integrity.Sign(w.MAC, t, rec); err != nil {
		return fmt.Errorf("worker: sign %s: %w", t.Name(), err)
	}
	return nil
}

func (w *Worker) doneTopic() string {
	if w.DoneTopic == "" {
		return event.TopicStoreDone
	}
	return w.DoneTopic
}

func (w *Worker) backoff() retry.Backoff {
	if w.Backoff.Base == 0 {
		return retry.Backoff{Base: 200 * time.Millisecond, Max: 2 * time.Second}
	}
	return w.Backoff
}

func (w *Worker) log() *zap.Logger {
	if w.Log == nil {
		return zap.NewNop()
	}
	return w.Log
}

func (w *Worker) now() time.Time {
	if w.Now == nil {
		return time.Now().UTC()
	}
	return w.Now()
}
