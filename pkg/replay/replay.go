// Package replay reconstructs the audit trail from the event topics and checks the audit
// table against it.
//
// Rebuild reads erasure.requested, erasure.store.done and erasure.completed from their
// first retained record up to the end offsets it saw when it started, and rebuilds every
// request from its events alone: the request (without identifiers), the latest report of
// each store and the receipts published for it. Compare then checks the audit table
// against that trail: every stored receipt must be the one the reports justify and the one
// that was published, every request complete per its reports must have a receipt, and
// every tenant's receipt chain must verify. Neither writes anything: they are safe to run
// against production at any time, as often as wanted.
package replay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/aggregator"
	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/broker"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/schemareg"
)

// Topics names the topics Rebuild reads. Empty names take the defaults of package event.
type Topics struct {
	Requested string // default event.TopicRequested
	StoreDone string // default event.TopicStoreDone
	Completed string // default event.TopicCompleted
	// StoreFound carries what deleters found before they deleted; default
	// event.TopicStoreFound. Unlike the others it may be missing (a cluster provisioned
	// before it existed): it is then read as empty.
	StoreFound string
}

func (t Topics) withDefaults() Topics {
	if t.Requested == "" {
		t.Requested = event.TopicRequested
	}
	if t.StoreDone == "" {
		t.StoreDone = event.TopicStoreDone
	}
	if t.Completed == "" {
		t.Completed = event.TopicCompleted
	}
	if t.StoreFound == "" {
		t.StoreFound = event.TopicStoreFound
	}
	return t
}

// Trail is the audit trail rebuilt from the topics. It holds no raw identifier: requests
// are kept as auditlog.Request.
type Trail struct {
	// Requests are the rebuilt requests by request id.
	Requests map[string]*Rebuilt
	// Records counts the records read per topic; Undecodable counts those of them that did
	// not decode as their topic's event or lacked the ids that place them in a request.
	Records, Undecodable map[string]int
}

// Rebuilt is one request as its events tell it.
type Rebuilt struct {
	RequestID string
	TenantID  string            // of the request, else of its first report or receipt
	Request   *auditlog.Request // the latest attempt; nil when no erasure.requested record was read
	// Reports holds each store's report as the aggregator keeps it (aggregator.Merge: the
	// highest attempt; of equal attempts the successful one that deleted most).
	Reports map[string]event.StoreDone
	// Published are the distinct receipts (by receipt id and hash) published for the
	// request, in the order they were first read.
	Published []event.Receipt
	// Twins are the other erasure.requested records of Request's attempt (a submission
	// published again after its state write failed, with its own requested_at), and Runs
	// every report and find read, in order (FinishedAt tells a redelivery that ran after
	// the receipt): the receipt may rest on either.
	Twins []auditlog.Request
	Runs  []event.StoreDone
}

// ReportList returns the reports ordered by store name, as auditlog.Store.Reports does.
func (r *Rebuilt) ReportList() []event.StoreDone {
	ds := make([]event.StoreDone, 0, len(r.Reports))
	for _, d := range r.Reports {
		ds = append(ds, d)
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i].Store < ds[j].Store })
	return ds
}

// IDs returns the rebuilt request ids in ascending order.
func (t *Trail) IDs() []string {
	ids := make([]string, 0, len(t.Requests))
	for id := range t.Requests {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// TotalUndecodable is the number of undecodable records over every topic.
func (t *Trail) TotalUndecodable() int {
	n := 0
	for _, c := range t.Undecodable {
		n += c
	}
	return n
}

// Rebuild reads the three topics from their first retained record up to the end offsets
// (high watermarks) listed when it starts, with a plain consumer (no group, nothing
// committed), and rebuilds the trail. Records are decoded in either framing through reg
// (schemareg.Codec.Decode); with a nil reg, registry-framed records count as
// undecodable. Records produced after the start are not read.
// Undecodable records are counted, not fatal. It fails when a topic does not exist, on a
// non-retriable fetch error, or when ctx ends before every partition was read to its end
// offset. Topics must not be written transactionally (a trailing transaction marker would
// keep Rebuild waiting for a record that never comes, until ctx ends).
func Rebuild(ctx context.Context, brokers broker.Config, topics Topics, reg *schemareg.Codec) (*Trail, error) {
	topics = topics.withDefaults()
	names := []string{topics.Requested, topics.StoreDone, topics.Completed}
	admin, err := kgo.NewClient(brokers.Options()...)
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	ends, err := readRange(ctx, kadm.NewClient(admin), names, topics.StoreFound)
	admin.Close()
	if err != nil {
		return nil, err
	}
	t := &Trail{Requests: map[string]*Rebuilt{}, Records: map[string]int{}, Undecodable: map[string]int{}}
	if len(ends) == 0 {
		return t, nil
	}
	assign := map[string]map[int32]kgo.Offset{}
	for p := range ends {
		if assign[p.topic] == nil {
			assign[p.topic] = map[int32]kgo.Offset{}
		}
		assign[p.topic][p.partition] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(append(brokers.Options(),
		kgo.ConsumePartitions(assign),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	defer cl.Close()
	for len(ends) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("replay: %d partitions not read to their end: %w", len(ends), err)
		}
		var fetchErr error
		fs.EachError(func(topic string, p int32, err error) {
			if !kerr.IsRetriable(err) && fetchErr == nil {
				fetchErr = fmt.Errorf("replay: fetch %s/%d: %w", topic, p, err)
			}
		})
		if fetchErr != nil {
			return nil, fetchErr
		}
		fs.EachRecord(func(r *kgo.Record) {
			k := partition{r.Topic, r.Partition}
			end, reading := ends[k]
			if !reading || r.Offset >= end {
				return // produced after Rebuild started
			}
			t.add(ctx, reg, topics, r)
			if r.Offset >= end-1 {
				delete(ends, k)
			}
		})
	}
	return t, nil
}

type partition struct {
	topic     string
	partition int32
}

// readRange returns the end offset of every partition of topics that holds records.
func readRange(ctx context.Context, adm *kadm.Client, topics []string, optional ...string) (map[partition]int64, error) {
	all := append(append([]string{}, topics...), optional...)
	starts, err := adm.ListStartOffsets(ctx, all...)
	if err == nil {
		err = offsetsErr(starts, optional)
	}
	if err != nil {
		return nil, fmt.Errorf("replay: list start offsets: %w", err)
	}
	ends, err := adm.ListEndOffsets(ctx, all...)
	if err == nil {
		err = offsetsErr(ends, optional)
	}
	if err != nil {
		return nil, fmt.Errorf("replay: list end offsets: %w", err)
	}
	out := map[partition]int64{}
	for _, topic := range topics {
		if len(ends[topic]) == 0 {
			return nil, fmt.Errorf("replay: topic %s: %w", topic, kerr.UnknownTopicOrPartition)
		}
	}
	ends.Each(func(o kadm.ListedOffset) {
		if s, ok := starts.Lookup(o.Topic, o.Partition); ok && s.Offset < o.Offset {
			out[partition{o.Topic, o.Partition}] = o.Offset
		}
	})
	return out, nil
}

// offsetsErr is the first per-partition error of l, naming its topic.
// offsetsErr is the first error of l, except that a topic of optional may be unknown.
func offsetsErr(l kadm.ListedOffsets, optional []string) error {
	var err error
	l.Each(func(o kadm.ListedOffset) {
		if errors.Is(o.Err, kerr.UnknownTopicOrPartition) && slices.Contains(optional, o.Topic) {
			return
		}
		if o.Err != nil && err == nil {
			err = fmt.Errorf("topic %s: %w", o.Topic, o.Err)
		}
	})
	return err
}

// errNoIDs marks a decoded record without the ids that place it in a request.
var errNoIDs = errors.New("replay: record without request id")

// add folds one record into the trail.
func (t *Trail) add(ctx context.Context, reg *schemareg.Codec, topics Topics, r *kgo.Record) {
	t.Records[r.Topic]++
	decode := func(typ *event.Type, v any) error { return reg.Decode(ctx, typ, r.Value, v) }
	var err error
	switch r.Topic {
	case topics.Requested:
		err = t.addRequested(decode)
	case topics.StoreDone:
		err = t.addStoreDone(decode)
	case topics.Completed:
		err = t.addCompleted(decode)
	case topics.StoreFound:
		err = t.addStoreFound(decode)
	}
	if err != nil {
		t.Undecodable[r.Topic]++
	}
}

// decoder reads the record being added as an event of a type.
type decoder func(t *event.Type, v any) error

func (t *Trail) addRequested(decode decoder) error {
	var ev event.Requested
	if err := decode(event.Request, &ev); err != nil {
		return err
	}
	req := auditlog.RequestOf(&ev) // the identifiers go no further than this function
	if req.RequestID == "" {
		return errNoIDs
	}
	if event.AfterReceipt(ev.Purpose) {
		return nil // a sweep or re-apply: its outcome is an addendum, not part of the receipt's trail
	}
	rb := t.request(req.RequestID, req.TenantID)
	switch {
	case rb.Request != nil && req.Attempt == rb.Request.Attempt:
		rb.Twins = append(rb.Twins, *rb.Request)
	case rb.Request != nil && req.Attempt > rb.Request.Attempt:
		rb.Twins = nil
	}
	if rb.Request == nil || req.Attempt >= rb.Request.Attempt {
		rb.Request = &req
		if req.TenantID != "" {
			rb.TenantID = req.TenantID
		}
	}
	return nil
}

func (t *Trail) addStoreDone(decode decoder) error {
	var d event.StoreDone
	if err := decode(event.Done, &d); err != nil {
		return err
	}
	if d.RequestID == "" || d.Store == "" {
		return errNoIDs
	}
	if event.AfterReceipt(d.Purpose) {
		return nil // reported by a sweep or re-apply after the receipt
	}
	rb := t.request(d.RequestID, d.TenantID)
	rb.Runs = append(rb.Runs, d)
	if old, ok := rb.Reports[d.Store]; ok {
		d = aggregator.Merge(old, d) // as the aggregator keeps them
	}
	rb.Reports[d.Store] = d
	return nil
}

func (t *Trail) addStoreFound(decode decoder) error {
	var f event.StoreFound
	if err := decode(event.Found, &f); err != nil {
		return err
	}
	if f.RequestID == "" || f.Store == "" {
		return errNoIDs
	}
	rb := t.request(f.RequestID, f.TenantID)
	d := aggregator.FoundReport(f)
	d.Store += aggregator.FoundSuffix // as the aggregator keeps it
	rb.Runs = append(rb.Runs, d)
	if old, ok := rb.Reports[d.Store]; ok {
		d = aggregator.Merge(old, d)
	}
	rb.Reports[d.Store] = d
	return nil
}

func (t *Trail) addCompleted(decode decoder) error {
	var rc event.Receipt
	if err := decode(event.Completed, &rc); err != nil {
		return err
	}
	if rc.RequestID == "" {
		return errNoIDs
	}
	rb := t.request(rc.RequestID, rc.TenantID)
	for _, p := range rb.Published {
		if p.ReceiptID == rc.ReceiptID && p.Hash == rc.Hash {
			return nil // the same receipt published again (a redelivery)
		}
	}
	rb.Published = append(rb.Published, rc)
	return nil
}

// request returns the rebuilt request of id, creating it.
func (t *Trail) request(id, tenant string) *Rebuilt {
	rb := t.Requests[id]
	if rb == nil {
		rb = &Rebuilt{RequestID: id, Reports: map[string]event.StoreDone{}}
		t.Requests[id] = rb
	}
	if rb.TenantID == "" {
		rb.TenantID = tenant
	}
	return rb
}

// handledStates returns the reports as the aggregator kept them after each first part of
// the request's store.done records together with each first part of its store.found
// records (each topic's records in the order they were read).
func (r *Rebuilt) handledStates() [][]event.StoreDone {
	var done, found []event.StoreDone
	for _, d := range r.Runs {
		if strings.HasSuffix(d.Store, aggregator.FoundSuffix) {
			found = append(found, d)
		} else {
			done = append(done, d)
		}
	}
	var out [][]event.StoreDone
	for i := range len(done) + 1 {
		for j := range len(found) + 1 {
			out = append(out, auditlog.FoldReports(append(slices.Clone(done[:i]), found[:j]...)))
		}
	}
	return out
}

// ReportsUntil returns the reports as the aggregator kept them from the runs that finished
// by at, ordered by store name.
func (r *Rebuilt) ReportsUntil(at time.Time) []event.StoreDone {
	var finished []event.StoreDone
	for _, d := range r.Runs {
		if !d.FinishedAt.After(at) {
			finished = append(finished, d)
		}
	}
	return auditlog.FoldReports(finished)
}
