package dlq

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/broker"
	"github.com/lethe-erasure/lethe/pkg/consumer"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/schemareg"
)

// Group is the consumer group in which Replay records what it replayed.
const Group = "lethe-dlq-replay"

// maxProgressBytes bounds the commit metadata of one partition (Kafka's
// offset.metadata.max.bytes defaults to 4096).
const maxProgressBytes = 4000

// ErrProgressFull is returned when Replay cannot record one more replayed record: the
// records it replayed are scattered among so many it passed over that their list no
// longer fits in the group's commit metadata. Replaying the records passed over (or a
// wider filter) compacts it.
var ErrProgressFull = errors.New("dlq: replay progress is full")

// ErrRefused is wrapped by the reason Replay did not replay a record its filter chose
// (Result.Refused). The record stays in the dead-letter topic, not replayed.
var ErrRefused = errors.New("not replayable")

// Reasons for a refusal, each wrapping ErrRefused.
var (
	// ErrRedacted: the dead letter is a redaction (Entry.Redacted). Replaying it would
	// submit placeholders for identifiers; its producer must submit it again.
	ErrRedacted = fmt.Errorf("%w: the dead letter was redacted (its identifiers are placeholders): the producer must submit the request again", ErrRefused)
	// ErrNeedsIntake: a record of erasure.intake is replayed only through the intake,
	// which authenticates the replay (Options.Intake): the console, or lethectl with the
	// intake's address and a token.
	ErrNeedsIntake = fmt.Errorf("%w: erasure.intake records are replayed through the intake API, which authenticates the replay", ErrRefused)
)

// Options configure Replay.
type Options struct {
	// Filter chooses the records to replay; nil chooses every record. It sees events
	// summarised through the registry (List).
	Filter func(Entry) bool
	// By is the name of the principal replaying, written as HeaderReplayedBy.
	By string
	// Intake, when set, takes each chosen record of erasure.intake in place of its topic:
	// it must authorise the replaying principal for the record's tenant and validate,
	// gate and submit it as the intake does any request, and returns once the request
	// was accepted. An error wrapping ErrRefused refuses the record (Result.Refused) and
	// the run goes on; any other error ends it. Without Intake such records are refused
	// (ErrNeedsIntake).
	Intake func(ctx context.Context, r *kgo.Record) error
	// Requested, when set, takes each chosen record of erasure.requested in place of its
	// topic, as Intake does: the intake passes it through its gates (workflow state, holds
	// in force now) before it publishes it. Without Requested such records are written back.
	Requested func(ctx context.Context, r *kgo.Record) error
}

// Result is what Replay did.
type Result struct {
	Replayed int       `json:"replayed"`
	Refused  []Refusal `json:"refused"`
}

// Refusal is a record the filter chose that Replay did not replay, and why.
type Refusal struct {
	Partition int32  `json:"partition"` // in the dead-letter topic
	Offset    int64  `json:"offset"`
	Reason    string `json:"reason"`
	Err       error  `json:"-"` // wraps ErrRefused
}

// Replay republishes the records of dlqTopic that opts.Filter chooses to their source
// topic, and returns how many it republished and which it refused. A republished record
// has the dead letter's key and value; of the dead letter's headers it carries only
// content-type, never a credential (dead letters written before pkg/consumer's allow-list
// may hold one), and it gains HeaderReplayedFrom and HeaderReplayedBy. Records of
// erasure.intake go to opts.Intake instead (see Options). A redacted dead letter is
// refused (ErrRedacted). Replay reads up to the end offsets listed when it starts.
//
// Progress lives in the consumer group Group, committed after each record's ProduceSync
// (or opts.Intake) was acknowledged: the committed offset is the partition's first record
// not yet replayed, and the commit metadata lists the replayed offsets above it. So a
// later run skips every record an earlier run replayed, while the records a filter passed
// over, and the refused ones, stay available to later runs. A crash between a record's
// produce and its commit republishes that one record on the next run (at least once;
// Lethe's consumers and the intake's idempotency keys make that harmless). Runs on the
// same dead-letter topic must not overlap: each would republish what the other is
// replaying. Replay stops at the first produce, intake or commit error, or when ctx ends,
// and returns the result so far with the error.
func Replay(ctx context.Context, brokers broker.Config, reg *schemareg.Codec, dlqTopic string, opts Options) (Result, error) {
	var res Result
	cl, err := brokers.NewProducer()
	if err != nil {
		return res, fmt.Errorf("dlq: replay %s: %w", dlqTopic, err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	prog, err := loadProgress(ctx, adm, dlqTopic)
	if err != nil {
		return res, fmt.Errorf("dlq: replay %s: %w", dlqTopic, err)
	}
	from := map[int32]int64{}
	for p, pr := range prog {
		from[p] = pr.base
	}
	started := map[int32]bool{}
	err = scan(ctx, brokers, dlqTopic, from, func(r *kgo.Record) (bool, error) {
		pr := prog[r.Partition]
		if pr == nil {
			pr = &progress{base: r.Offset}
			prog[r.Partition] = pr
		}
		if !started[r.Partition] {
			started[r.Partition] = true
			pr.advanceTo(r.Offset)
		}
		if pr.done(r.Offset) {
			return true, nil
		}
		e := EntryOf(ctx, reg, dlqTopic, r)
		if opts.Filter != nil && !opts.Filter(e) {
			return true, nil
		}
		refuse := func(err error) (bool, error) {
			res.Refused = append(res.Refused, Refusal{Partition: r.Partition, Offset: r.Offset, Reason: err.Error(), Err: err})
			return true, nil
		}
		if e.Redacted {
			return refuse(ErrRedacted)
		}
		if e.SourceTopic == "" || e.SourceTopic == dlqTopic {
			return false, fmt.Errorf("record %d/%d has no source topic", r.Partition, r.Offset)
		}
		if e.SourceTopic == event.TopicIntake && opts.Intake == nil {
			return refuse(ErrNeedsIntake)
		}
		next := pr.with(r.Offset)
		meta := next.metadata()
		if len(meta) > maxProgressBytes {
			return false, fmt.Errorf("%w: record %d/%d not replayed", ErrProgressFull, r.Partition, r.Offset)
		}
		out := &kgo.Record{Topic: e.SourceTopic, Key: r.Key, Value: r.Value, Headers: replayHeaders(dlqTopic, r, opts.By)}
		if submit := opts.submitter(e.SourceTopic); submit != nil {
			err := submit(ctx, out)
			if errors.Is(err, ErrRefused) {
				return refuse(err)
			}
			if err != nil {
				return false, fmt.Errorf("submit record %d/%d: %w", r.Partition, r.Offset, err)
			}
		} else if err := cl.ProduceSync(ctx, out).FirstErr(); err != nil {
			return false, fmt.Errorf("republish record %d/%d: %w", r.Partition, r.Offset, err)
		}
		res.Replayed++
		off := kadm.Offsets{}
		off.Add(kadm.Offset{Topic: dlqTopic, Partition: r.Partition, At: next.base, LeaderEpoch: -1, Metadata: meta})
		resp, err := adm.CommitOffsets(ctx, Group, off)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			return false, fmt.Errorf("commit progress after record %d/%d (it will be republished by the next run): %w", r.Partition, r.Offset, err)
		}
		prog[r.Partition] = next
		return true, nil
	})
	if err != nil {
		return res, fmt.Errorf("dlq: replay %s: %w", dlqTopic, err)
	}
	return res, nil
}

// submitter is the hook that takes records of topic in place of the topic, if any.
func (o Options) submitter(topic string) func(context.Context, *kgo.Record) error {
	switch topic {
	case event.TopicIntake:
		return o.Intake
	case event.TopicRequested:
		return o.Requested
	}
	return nil
}

// replayHeaders are r's content-type header, the only one of the record's own headers a
// replay carries, plus HeaderReplayedFrom and, when by is set, HeaderReplayedBy.
func replayHeaders(dlqTopic string, r *kgo.Record, by string) []kgo.RecordHeader {
	var hs []kgo.RecordHeader
	for _, h := range r.Headers {
		k := strings.ToLower(h.Key)
		if k == consumer.HeaderContentType {
			hs = append(hs, h)
		}
	}
	from := fmt.Sprintf("%s/%d/%d", dlqTopic, r.Partition, r.Offset)
	hs = append(hs, kgo.RecordHeader{Key: HeaderReplayedFrom, Value: []byte(from)})
	if by != "" {
		hs = append(hs, kgo.RecordHeader{Key: HeaderReplayedBy, Value: []byte(by)})
	}
	return hs
}

// progress is one partition's replay progress: every record below base was replayed (or
// no longer exists); ranges lists the replayed offsets at or above base, sorted and
// disjoint, none touching base.
type progress struct {
	base   int64
	ranges [][2]int64 // inclusive
}

// done reports whether the record at o was replayed.
func (p *progress) done(o int64) bool {
	if o < p.base {
		return true
	}
	for _, r := range p.ranges {
		if o >= r[0] && o <= r[1] {
			return true
		}
	}
	return false
}

// advanceTo records that no record exists between base and o: o is the first record a
// run read at or after base (the others were removed by retention or compaction, or were
// transaction markers).
func (p *progress) advanceTo(o int64) {
	if o <= p.base {
		return
	}
	p.base = o
	for len(p.ranges) > 0 && p.ranges[0][1] < o {
		p.ranges = p.ranges[1:]
	}
	if len(p.ranges) > 0 && p.ranges[0][0] <= o {
		p.base = p.ranges[0][1] + 1
		p.ranges = p.ranges[1:]
	}
}

// with returns a copy of p with o replayed.
func (p *progress) with(o int64) *progress {
	rs := append([][2]int64{}, p.ranges...)
	rs = append(rs, [2]int64{o, o})
	// Insertion sort of the new range, then merge neighbours.
	for i := len(rs) - 1; i > 0 && rs[i][0] < rs[i-1][0]; i-- {
		rs[i], rs[i-1] = rs[i-1], rs[i]
	}
	merged := rs[:0]
	for _, r := range rs {
		if k := len(merged); k > 0 && r[0] <= merged[k-1][1]+1 {
			merged[k-1][1] = max(merged[k-1][1], r[1])
			continue
		}
		merged = append(merged, r)
	}
	next := &progress{base: p.base, ranges: merged}
	if len(merged) > 0 && merged[0][0] <= next.base {
		next.base = merged[0][1] + 1
		next.ranges = merged[1:]
	}
	return next
}

// metadata encodes the ranges: "v1:" then "lo-hi" or "o" entries separated by commas.
func (p *progress) metadata() string {
	var b strings.Builder
	b.WriteString("v1:")
	for i, r := range p.ranges {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(r[0], 10))
		if r[1] != r[0] {
			b.WriteByte('-')
			b.WriteString(strconv.FormatInt(r[1], 10))
		}
	}
	return b.String()
}

// parseProgress decodes a commit of offset base with metadata meta.
func parseProgress(base int64, meta string) (*progress, error) {
	p := &progress{base: base}
	body, ok := strings.CutPrefix(meta, "v1:")
	if !ok {
		return nil, fmt.Errorf("unknown progress format %.20q", meta)
	}
	if body == "" {
		return p, nil
	}
	last := base
	for _, f := range strings.Split(body, ",") {
		lo, hi, isRange := strings.Cut(f, "-")
		a, err := strconv.ParseInt(lo, 10, 64)
		b := a
		if err == nil && isRange {
			b, err = strconv.ParseInt(hi, 10, 64)
		}
		if err != nil || a <= last || b < a {
			return nil, fmt.Errorf("malformed progress entry %.30q", f)
		}
		p.ranges = append(p.ranges, [2]int64{a, b})
		last = b
	}
	return p, nil
}

// loadProgress reads the group's committed progress on topic.
func loadProgress(ctx context.Context, adm *kadm.Client, topic string) (map[int32]*progress, error) {
	resps, err := adm.FetchOffsets(ctx, Group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return map[int32]*progress{}, nil // no run committed yet
	}
	if err != nil {
		return nil, fmt.Errorf("fetch progress: %w", err)
	}
	out := map[int32]*progress{}
	for p, r := range resps[topic] {
		if r.Err != nil {
			return nil, fmt.Errorf("fetch progress of partition %d: %w", p, r.Err)
		}
		if r.At < 0 {
			continue
		}
		pr, err := parseProgress(r.At, r.Metadata)
		if err != nil {
			return nil, fmt.Errorf("progress of partition %d: %w", p, err)
		}
		out[p] = pr
	}
	return out, nil
}
