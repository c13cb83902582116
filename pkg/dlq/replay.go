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

// Replay republishes the records of dlqTopic that filter accepts (every record when filter
// is nil) to their source topic, with key and value unchanged, the lethe.dlq.* headers
// removed and a lethe.replayed-from header added, and returns how many it republished. It
// reads up to the end offsets listed when it starts. filter sees events summarised through
// reg (List).
//
// Progress lives in the consumer group Group, committed after each record's ProduceSync
// was acknowledged: the committed offset is the partition's first record not yet
// replayed, and the commit metadata lists the replayed offsets above it. So a later run
// skips every record an earlier run replayed, while the records a filter passed over stay
// available to later runs. A crash between a record's produce and its commit republishes
// that one record on the next run (at least once; Lethe's consumers are idempotent). Runs
// on the same dead-letter topic must not overlap: each would republish what the other is
// replaying. Replay stops at the first produce or commit error, or when ctx ends, and
// returns the count so far with the error.
func Replay(ctx context.Context, brokers broker.Config, reg *schemareg.Codec, dlqTopic string, filter func(Entry) bool) (int, error) {
	cl, err := brokers.NewProducer()
	if err != nil {
		return 0, fmt.Errorf("dlq: replay %s: %w", dlqTopic, err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	prog, err := loadProgress(ctx, adm, dlqTopic)
	if err != nil {
		return 0, fmt.Errorf("dlq: replay %s: %w", dlqTopic, err)
	}
	from := map[int32]int64{}
	for p, pr := range prog {
		from[p] = pr.base
	}
	n := 0
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
		if filter != nil && !filter(e) {
			return true, nil
		}
		if e.SourceTopic == "" || e.SourceTopic == dlqTopic {
			return false, fmt.Errorf("record %d/%d has no source topic", r.Partition, r.Offset)
		}
		next := pr.with(r.Offset)
		meta := next.metadata()
		if len(meta) > maxProgressBytes {
			return false, fmt.Errorf("%w: record %d/%d not replayed", ErrProgressFull, r.Partition, r.Offset)
		}
		out := &kgo.Record{Topic: e.SourceTopic, Key: r.Key, Value: r.Value, Headers: replayHeaders(dlqTopic, r)}
		if err := cl.ProduceSync(ctx, out).FirstErr(); err != nil {
			return false, fmt.Errorf("republish record %d/%d: %w", r.Partition, r.Offset, err)
		}
		n++
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
		return n, fmt.Errorf("dlq: replay %s: %w", dlqTopic, err)
	}
	return n, nil
}

// replayHeaders are r's headers without the lethe.dlq.* ones (and without an earlier
// replay's mark), plus HeaderReplayedFrom.
func replayHeaders(dlqTopic string, r *kgo.Record) []kgo.RecordHeader {
	var hs []kgo.RecordHeader
	for _, h := range r.Headers {
		if !strings.HasPrefix(h.Key, "lethe.dlq.") && h.Key != HeaderReplayedFrom {
			hs = append(hs, h)
		}
	}
	from := fmt.Sprintf("%s/%d/%d", dlqTopic, r.Partition, r.Offset)
	return append(hs, kgo.RecordHeader{Key: HeaderReplayedFrom, Value: []byte(from)})
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
