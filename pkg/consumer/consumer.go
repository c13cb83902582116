// Package consumer runs a Handler over the records of Kafka topics in a consumer group.
//
// Delivery semantics: at least once, in order per partition. Each assigned partition has
// its own goroutine; a record's offset is marked only after its Handler returned nil (the
// Handler returns only once its side effect and its follow-up events were acknowledged) or
// after the record was written to the dead-letter topic. Marked offsets are committed
// periodically, on revoke and on shutdown; nothing is committed for lost partitions, so
// their records are delivered again to the next owner. A transient error retries the same
// record with capped, jittered exponential backoff (retry.Backoff), holding only its own
// partition (fetching pauses there while the others go on); a permanent error
// (retry.IsPermanent, or an event decoding error) sends the record to <topic>.dlq with the
// reason in headers, and the partition moves on. A dead letter keeps only the allow-listed
// headers of its record (see HeaderReason), never a credential. A revoked partition
// (and every partition at shutdown) takes no new record but may finish the one in hand for
// Config.Grace, so a handler that already changed a store also publishes its report; a
// lost partition is cancelled at once. Run returns when ctx is done, after in-flight
// handlers returned and marked offsets were committed.
package consumer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kzap"
	"go.uber.org/zap"

	"github.com/lethe-erasure/lethe/pkg/broker"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/metrics"
	"github.com/lethe-erasure/lethe/pkg/retry"
)

// Handler processes one record. It must be idempotent: a record may be delivered again
// after a crash or a rebalance. It returns nil only when every effect of the record,
// including events it produces, was acknowledged.
type Handler func(ctx context.Context, r *kgo.Record) error

// permanent reports whether err sends its record to the dead-letter topic: retry says it
// is permanent, or it is an event decoding error (a record that does not decode now never
// will).
func permanent(err error) bool {
	return retry.IsPermanent(err) || errors.Is(err, event.ErrMalformed) || errors.Is(err, event.ErrUnknownSchema)
}

// Config configures Run.
type Config struct {
	Broker  broker.Config
	Group   string
	Topics  []string
	Backoff retry.Backoff // default 50ms..5s
	Log     *zap.Logger   // records are logged by topic, partition and offset only
	// MaxRecordBytes: larger records go to the DLQ unread. Default 1 MiB.
	MaxRecordBytes int
	// Queue is how many records a partition may hold before its fetching pauses. Default 256.
	Queue int
	// Metrics records retries, dead-lettered records and lag; nil records nothing.
	Metrics *metrics.Metrics
	// Redact, when set, returns the value written to the dead-letter topic in place of a
	// record's own (for topics whose records carry raw identifiers in the clear), and
	// whether it redacted anything: a redacted dead letter is marked HeaderRedacted, and
	// Lethe never replays it.
	Redact func(rec *kgo.Record) (value []byte, redacted bool)
	// Grace is how long a revoked partition, or one stopping at shutdown, may finish the
	// records in hand (their side effects and follow-up events) before the handlers'
	// context is cancelled. Default 10s. Lost partitions are cancelled at once.
	Grace time.Duration
	// InFlight is how many records of one partition are handled at once; default 1, in
	// order. Above 1, records start in offset order and run concurrently, except that a
	// record waits for the records before it with the same key (Lethe keys every record by
	// its request id, so one request's records are still handled one at a time, in order);
	// an offset is marked only once every record up to it is done, so a crash redelivers
	// every record that was not done and possibly some that were (the at-least-once
	// contract is unchanged).
	InFlight int
	// MaxInFlight bounds how many records run at once over all the partitions the
	// consumer owns (InFlight each): a record beyond it waits, not running, until one
	// ends. Without it a deleter owning 12 partitions runs 768 erasures side by side; held
	// to a small CPU share (a pod's CPU limit), such a process starved its own group
	// heartbeats, was dropped from the group again and again and cancelled its work each
	// time. Default DefaultMaxInFlight; below 0: no bound.
	MaxInFlight int
}

// DefaultMaxInFlight is Config.MaxInFlight unless set: twice the largest batch a deleter
// hands a store by default, so that a batch can gather while the one before it runs. It
// suits an instance with a core or more; one held to a fraction of a core needs far
// fewer (LETHE_INFLIGHT_MAX: the scaling runs give 50m instances 64, docs/delivery-guarantees.md).
const DefaultMaxInFlight = 256

// Run consumes cfg.Topics in cfg.Group until ctx is done.
func Run(ctx context.Context, cfg Config, h Handler) error {
	if cfg.Backoff.Base == 0 {
		cfg.Backoff = retry.Backoff{Base: 50 * time.Millisecond, Max: 5 * time.Second}
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	// franz-go names the group in its own messages; Lethe's name it as "group" too.
	kgoLog := cfg.Log.Named("kgo").WithOptions(zap.AddStacktrace(zap.FatalLevel))
	cfg.Log = cfg.Log.With(zap.String("group", cfg.Group))
	if cfg.MaxRecordBytes == 0 {
		cfg.MaxRecordBytes = 1 << 20
	}
	if cfg.Queue == 0 {
		cfg.Queue = 256
	}
	if cfg.Grace == 0 {
		cfg.Grace = 10 * time.Second
	}
	cfg.InFlight = max(cfg.InFlight, 1)
	if cfg.MaxInFlight == 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	cfg.Metrics = metrics.Or(cfg.Metrics)
	r := &runner{cfg: cfg, h: h, parts: map[tp]*partition{}, lag: map[tp]int64{}}
	if cfg.MaxInFlight > 0 {
		r.slots = make(chan struct{}, cfg.MaxInFlight)
	}
	opts := append(cfg.Broker.Options(),
		// A killed member is evicted after 10 s, and a rebalance waits at most 15 s for
		// members to rejoin: with the defaults (45 s, 60 s), members killed and restarted
		// in quick succession kept a group rebalancing without progress for minutes.
		kgo.SessionTimeout(10*time.Second), kgo.RebalanceTimeout(15*time.Second),
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsAssigned(r.assigned),
		kgo.OnPartitionsRevoked(r.revoked),
		kgo.OnPartitionsLost(r.lost),
		kgo.AutoCommitMarks(),
		kgo.BlockRebalanceOnPoll(),
		kgo.FetchMaxPartitionBytes(int32(cfg.MaxRecordBytes)*2),
		// franz-go's warnings and errors; they name topics, partitions, groups and members,
		// never record contents. Its joins, syncs and assignments are Lethe's to log.
		kgo.WithLogger(kzap.New(kgoLog, kzap.Level(kgo.LogLevelWarn))),
	)
	cl, err := kgo.NewClient(append(opts, cfg.Broker.GroupOptions()...)...)
	if err != nil {
		return fmt.Errorf("consumer: %w", err)
	}

	for {
		fetches := cl.PollRecords(ctx, 1000)
		if fetches.IsClientClosed() || ctx.Err() != nil {
			break
		}
		fetches.EachError(func(t string, p int32, err error) {
			cfg.Log.Warn("fetch error", zap.String("topic", t), zap.Int32("partition", p), zap.Error(err))
		})
		fetches.EachPartition(func(p kgo.FetchTopicPartition) {
			r.mu.Lock()
			pc := r.parts[tp{p.Topic, p.Partition}]
			r.mu.Unlock()
			if pc != nil && len(p.Records) > 0 {
				pc.hw.Store(p.HighWatermark)
				pc.push(p.Records)
			}
		})
		cl.AllowRebalance()
	}
	r.stopAll()
	cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := cl.CommitMarkedOffsets(cctx); err != nil {
		cfg.Log.Warn("final commit failed", zap.Error(err))
	}
	cl.CloseAllowingRebalance() // leaves the group; the revoke callback commits again
	return nil
}

type tp struct {
	topic     string
	partition int32
}

type runner struct {
	cfg   Config
	h     Handler
	mu    sync.Mutex // guards parts and lag: group callbacks may run outside the poll loop
	parts map[tp]*partition
	lag   map[tp]int64
	slots chan struct{} // one token per running record (Config.MaxInFlight); nil: no bound
}

// setLag records a partition's lag (nil: the partition left) and updates the topic's gauge.
func (r *runner) setLag(k tp, lag *int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if lag == nil {
		delete(r.lag, k)
	} else {
		r.lag[k] = *lag
	}
	var sum int64
	for o, l := range r.lag {
		if o.topic == k.topic {
			sum += l
		}
	}
	r.cfg.Metrics.ConsumerLag.WithLabelValues(r.cfg.Group, k.topic).Set(float64(sum))
}

func (r *runner) assigned(_ context.Context, cl *kgo.Client, assigned map[string][]int32) {
	// A pause outlives a rebalance in franz-go: a partition paused while it was ours
	// before (its queue was full when it was revoked) would never be fetched again.
	cl.ResumeFetchPartitions(assigned)
	r.cfg.Log.Info("partitions assigned", zap.Any("partitions", assigned))
	r.mu.Lock()
	defer r.mu.Unlock()
	for topic, ps := range assigned {
		for _, p := range ps {
			pc := &partition{r: r, cl: cl, tp: tp{topic, p}, wake: make(chan struct{}, 1), quit: make(chan struct{}),
				kill: make(chan struct{}), done: make(chan struct{})}
			r.parts[pc.tp] = pc
			go pc.run()
		}
	}
}

func (r *runner) revoked(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
	r.cfg.Log.Info("partitions revoked", zap.Any("partitions", revoked))
	r.stop(revoked, r.cfg.Grace)
	if err := cl.CommitMarkedOffsets(ctx); err != nil {
		r.cfg.Log.Warn("commit on revoke failed", zap.Error(err))
	}
}

func (r *runner) lost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	r.cfg.Log.Warn("partitions lost", zap.Any("partitions", lost))
	r.stop(lost, 0) // nothing to finish or commit: the partitions belong to someone else now
}

// stop stops the partitions in m: each finishes the record in hand for up to grace (its
// handler's context is then cancelled) and takes no other.
func (r *runner) stop(m map[string][]int32, grace time.Duration) {
	r.mu.Lock()
	var stopping []*partition
	for topic, ps := range m {
		for _, p := range ps {
			if pc := r.parts[tp{topic, p}]; pc != nil {
				delete(r.parts, pc.tp)
				stopping = append(stopping, pc)
			}
		}
	}
	r.mu.Unlock()
	for _, pc := range stopping {
		close(pc.quit)
		go func() {
			t := time.NewTimer(grace)
			defer t.Stop()
			select {
			case <-pc.done:
			case <-t.C:
				close(pc.kill)
			}
		}()
	}
	for _, pc := range stopping {
		<-pc.done
		r.setLag(pc.tp, nil)
	}
}

func (r *runner) stopAll() {
	m := map[string][]int32{}
	r.mu.Lock()
	for k := range r.parts {
		m[k.topic] = append(m[k.topic], k.partition)
	}
	r.mu.Unlock()
	r.stop(m, r.cfg.Grace)
}

// partition processes one partition's records, Config.InFlight at a time, in order.
type partition struct {
	r      *runner
	cl     *kgo.Client
	tp     tp
	mu     sync.Mutex
	queue  []*kgo.Record
	paused bool
	hw     atomic.Int64 // high watermark seen in the last fetch
	wake   chan struct{}
	quit   chan struct{} // closed: take no more records
	kill   chan struct{} // closed: cancel the record in hand
	done   chan struct{}
}

func (p *partition) push(recs []*kgo.Record) {
	p.mu.Lock()
	p.queue = append(p.queue, recs...)
	if !p.paused && len(p.queue) >= p.r.cfg.Queue {
		p.paused = true
		p.cl.PauseFetchPartitions(map[string][]int32{p.tp.topic: {p.tp.partition}})
	}
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *partition) next() (*kgo.Record, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.queue) == 0 {
		return nil, false
	}
	rec := p.queue[0]
	p.queue[0] = nil
	p.queue = p.queue[1:]
	if p.paused && len(p.queue) <= p.r.cfg.Queue/2 {
		p.paused = false
		p.cl.ResumeFetchPartitions(map[string][]int32{p.tp.topic: {p.tp.partition}})
	}
	return rec, true
}

func (p *partition) run() {
	defer close(p.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-p.kill:
			cancel()
		case <-ctx.Done():
		}
	}()
	w := window{p: p, ctx: ctx, results: make(chan outcome, p.r.cfg.InFlight), finished: map[*kgo.Record]bool{}, waiting: map[string][]*kgo.Record{}}
	defer w.drain()
	for !w.stopped {
		select {
		case <-p.quit:
			return
		default:
		}
		if w.taken == p.r.cfg.InFlight {
			w.collect(<-w.results)
			continue
		}
		rec, ok := p.next()
		if !ok {
			select {
			case <-p.wake:
			case res := <-w.results:
				w.collect(res)
			case <-p.quit:
				return
			}
			continue
		}
		w.take(rec)
	}
}

// window is the records of a partition taken and not yet marked, in offset order: those
// running, those waiting for a running record with the same key, and those done after a
// record that is not done yet.
type window struct {
	p        *partition
	ctx      context.Context
	results  chan outcome
	order    []*kgo.Record
	finished map[*kgo.Record]bool     // done (true) or stopped before done (false)
	waiting  map[string][]*kgo.Record // by key, behind the running record of that key
	taken    int                      // running or waiting
	stopped  bool                     // a record was stopped: nothing more starts or is marked
	draining bool                     // the partition stops: nothing more starts
}

// take starts rec, or queues it behind the running record with its key.
func (w *window) take(rec *kgo.Record) {
	w.order = append(w.order, rec)
	w.taken++
	if k := string(rec.Key); k != "" {
		if q, busy := w.waiting[k]; busy {
			w.waiting[k] = append(q, rec)
			return
		}
		w.waiting[k] = nil // k runs
	}
	w.start(rec)
}

func (w *window) start(rec *kgo.Record) {
	go func() {
		ok := w.p.admit(w.ctx)
		if ok {
			ok = w.p.process(w.ctx, rec)
			w.p.release()
		}
		w.results <- outcome{rec, ok}
	}()
}

// admit waits for one of the runner's slots (Config.MaxInFlight); false: ctx ended or the
// partition stops first, and the record is stopped before it started.
func (p *partition) admit(ctx context.Context) bool {
	if p.r.slots == nil {
		return true
	}
	select {
	case p.r.slots <- struct{}{}:
		return true
	case <-ctx.Done():
	case <-p.quit:
	}
	return false
}

func (p *partition) release() {
	if p.r.slots != nil {
		<-p.r.slots
	}
}

// collect records one outcome, starts the next record of its key, and marks the done
// prefix of the window.
func (w *window) collect(res outcome) {
	w.taken--
	w.finished[res.rec] = res.ok
	if !res.ok {
		w.stopped = true // stopped before the record was done: it and what follows stay unmarked
	}
	if k := string(res.rec.Key); k != "" {
		switch q := w.waiting[k]; {
		case len(q) == 0:
			delete(w.waiting, k)
		case !w.stopped && !w.draining:
			w.waiting[k] = q[1:]
			w.start(q[0])
		}
	}
	var last *kgo.Record
	for len(w.order) > 0 && !w.stopped {
		if ok, in := w.finished[w.order[0]]; !in || !ok {
			break
		}
		last = w.order[0]
		delete(w.finished, last)
		w.order = w.order[1:]
	}
	if last != nil {
		w.p.cl.MarkCommitRecords(last)
		lag := max(w.p.hw.Load()-last.Offset-1, 0)
		w.p.r.setLag(w.p.tp, &lag)
	}
}

// drain waits for the running records; waiting ones never start, and stay unmarked.
func (w *window) drain() {
	w.draining = true
	for running := w.taken - w.queued(); running > 0; running-- {
		w.collect(<-w.results)
	}
}

func (w *window) queued() int {
	n := 0
	for _, q := range w.waiting {
		n += len(q)
	}
	return n
}

// outcome is how the handling of a record ended: done (ok), or stopped before it was.
type outcome struct {
	rec *kgo.Record
	ok  bool
}

// process handles rec until it succeeded or went to the DLQ (true), or ctx ended (false).
func (p *partition) process(ctx context.Context, rec *kgo.Record) bool {
	log := p.r.cfg.Log.With(zap.String("topic", rec.Topic), zap.Int32("partition", rec.Partition), zap.Int64("offset", rec.Offset))
	for attempt := 1; ; attempt++ {
		var err error
		if len(rec.Value) > p.r.cfg.MaxRecordBytes {
			err = oversized(len(rec.Value))
		} else {
			err = p.r.h(ctx, rec)
		}
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		if permanent(err) {
			log.Warn("record dead-lettered", zap.Error(err))
			ok := p.deadLetter(ctx, rec, err)
			if ok {
				p.r.cfg.Metrics.DLQRecords.WithLabelValues(p.r.cfg.Group, rec.Topic).Inc()
			}
			return ok
		}
		select {
		case <-p.quit:
			return false // stopping: the next owner retries it
		default:
		}
		p.r.cfg.Metrics.ConsumerRetries.WithLabelValues(p.r.cfg.Group, rec.Topic).Inc()
		d := p.r.cfg.Backoff.Delay(attempt)
		log.Warn("record failed, retrying", zap.Int("attempt", attempt), zap.Duration("backoff", d), zap.Error(err))
		if !sleep(ctx, p.quit, d) {
			return false
		}
	}
}

type oversized int

func (o oversized) Error() string   { return fmt.Sprintf("record of %d bytes is over the limit", int(o)) }
func (o oversized) Permanent() bool { return true }

// sleep waits d and reports true, or false when ctx ends or quit closes first.
func sleep(ctx context.Context, quit <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-quit:
		return false
	}
}
