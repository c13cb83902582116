// Package dlq lists and replays the records of a dead-letter topic.
//
// pkg/consumer writes a record its handler failed on permanently (or could not decode) to
// <topic>.dlq with lethe.dlq.* headers saying where it came from and why. A dead letter
// keeps the record's key and value (or, for erasure.intake, a redaction of the value) but
// of its headers only an allow-list: content-type (its media type, with the record's own
// value), lethe.replayed-from and lethe.replayed-by. A producer's credential
// (authorization) is never kept; lethe.dlq.principal names the principal it
// authenticated, when it did. List shows dead letters without their payload.
//
// Replay publishes chosen ones back to their source topic once the cause is fixed, and
// remembers in a consumer group what it replayed. A replayed record carries the dead
// letter's key, value and content-type header, lethe.replayed-from and lethe.replayed-by
// (the replaying principal), so it holds no credential: a record of erasure.intake, whose
// producers authenticate by a record header, is therefore never written back to its topic
// but handed to the intake (Options.Intake), which authorises the replaying principal
// and validates, gates and submits the request as it does any other. A redacted dead
// letter (lethe.dlq.redacted, or identifiers of the form "pseudonym:<hex>") is refused:
// replaying it would erase the placeholder, so the producer must resubmit.
package dlq

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/broker"
	"github.com/lethe-erasure/lethe/pkg/consumer"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/schemareg"
)

// HeaderReplayedFrom is the header Replay adds to a republished record: the dead-letter
// record it came from, as "<dlq topic>/<partition>/<offset>".
const HeaderReplayedFrom = consumer.HeaderReplayedFrom

// HeaderReplayedBy is the header Replay adds to a republished record: the name of the
// principal that replayed it (Options.By).
const HeaderReplayedBy = consumer.HeaderReplayedBy

// PlaceholderPrefix starts the placeholder that replaces an identifier in a redacted
// dead letter of erasure.intake: "pseudonym:" and the identifier's keyed pseudonym in hex.
const PlaceholderPrefix = "pseudonym:"

// IsPlaceholder reports whether id has the form of a redacted identifier,
// PlaceholderPrefix followed by lower-case hex digits.
func IsPlaceholder(id string) bool {
	hex, ok := strings.CutPrefix(id, PlaceholderPrefix)
	if !ok || hex == "" {
		return false
	}
	for _, c := range hex {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// redactedPrefix starts the value of a redacted dead letter whose record did not decode.
const redactedPrefix = "redacted: "

// Entry describes one dead-letter record. It holds no payload: for events that carry raw
// identifiers (erasure.requested, erasure.intake) only the summary below is kept.
type Entry struct {
	Partition int32 `json:"partition"` // in the dead-letter topic
	Offset    int64 `json:"offset"`    // in the dead-letter topic

	SourceTopic     string    `json:"source_topic"` // lethe.dlq.topic, else the dead-letter topic without ".dlq"
	SourcePartition int32     `json:"source_partition"`
	SourceOffset    int64     `json:"source_offset"`
	Reason          string    `json:"reason"`
	Group           string    `json:"group"`
	At              time.Time `json:"at"`            // when it was dead-lettered
	ReplayedFrom    string    `json:"replayed_from"` // set when the record failed again after a replay
	ReplayedBy      string    `json:"replayed_by,omitempty"`
	// Principal names the principal the record's credential authenticated, if it did.
	Principal string `json:"principal,omitempty"`
	// Redacted: the value is a redaction (identifiers replaced by placeholders, or
	// undecodable bytes by their digest), not the record as sent. Replay refuses it.
	Redacted bool `json:"redacted"`

	Key   string   `json:"key"`   // the record key: a request id, or a tenant on erasure.intake
	Size  int      `json:"size"`  // bytes of the record value
	Event *Summary `json:"event"` // nil when the value is not a Lethe event
}

// Summary is what an entry shows of a Lethe event: never its identifiers.
type Summary struct {
	Type      string `json:"type"`                 // the schema name: intake, requested, store_done, completed
	RequestID string `json:"request_id,omitempty"` // empty for intake
	TenantID  string `json:"tenant_id"`
}

// List returns the first limit entries (every entry when limit <= 0) of dlqTopic, ordered by
// partition then offset, reading up to the end offsets listed when it starts. It reads
// without a consumer group and commits nothing. Events are summarised in either framing
// through reg (nil: single-object ones only).
func List(ctx context.Context, brokers broker.Config, reg *schemareg.Codec, dlqTopic string, limit int) ([]Entry, error) {
	var out []Entry
	perPartition := map[int32]int{}
	err := scan(ctx, brokers, dlqTopic, nil, func(r *kgo.Record) (bool, error) {
		out = append(out, EntryOf(ctx, reg, dlqTopic, r))
		perPartition[r.Partition]++
		// Later records of this partition cannot be among the first limit entries.
		return limit <= 0 || perPartition[r.Partition] < limit, nil
	})
	if err != nil {
		return nil, fmt.Errorf("dlq: list %s: %w", dlqTopic, err)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Partition != out[j].Partition {
			return out[i].Partition < out[j].Partition
		}
		return out[i].Offset < out[j].Offset
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// EntryOf describes the dead-letter record r of dlqTopic, decoding its event in either
// framing through reg (nil: single-object only). Missing or malformed headers leave their
// fields zero.
func EntryOf(ctx context.Context, reg *schemareg.Codec, dlqTopic string, r *kgo.Record) Entry {
	sum, placeholders := summarize(ctx, reg, r.Value)
	e := Entry{Partition: r.Partition, Offset: r.Offset, Key: string(r.Key), Size: len(r.Value), Event: sum,
		Redacted: placeholders || strings.HasPrefix(string(r.Value), redactedPrefix)}
	for _, h := range r.Headers {
		v := string(h.Value)
		switch h.Key {
		case consumer.HeaderTopic:
			e.SourceTopic = v
		case consumer.HeaderPartition:
			if p, err := strconv.ParseInt(v, 10, 32); err == nil {
				e.SourcePartition = int32(p)
			}
		case consumer.HeaderOffset:
			if o, err := strconv.ParseInt(v, 10, 64); err == nil {
				e.SourceOffset = o
			}
		case consumer.HeaderReason:
			e.Reason = v
		case consumer.HeaderGroup:
			e.Group = v
		case consumer.HeaderAt:
			if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
				e.At = t
			}
		case consumer.HeaderPrincipal:
			e.Principal = v
		case consumer.HeaderRedacted:
			e.Redacted = e.Redacted || v == "true"
		case HeaderReplayedFrom:
			e.ReplayedFrom = v
		case HeaderReplayedBy:
			e.ReplayedBy = v
		}
	}
	if e.SourceTopic == "" && strings.HasSuffix(dlqTopic, ".dlq") {
		e.SourceTopic = strings.TrimSuffix(dlqTopic, ".dlq")
	}
	return e
}

// summarize decodes v as any Lethe event and keeps its type, request id and tenant; for
// an intake request, it also reports whether an identifier is a placeholder (a redaction).
func summarize(ctx context.Context, reg *schemareg.Codec, v []byte) (*Summary, bool) {
	var req event.Requested
	if reg.Decode(ctx, event.Request, v, &req) == nil {
		return &Summary{Type: event.Request.Name(), RequestID: req.RequestID, TenantID: req.TenantID}, false
	}
	var d event.StoreDone
	if reg.Decode(ctx, event.Done, v, &d) == nil {
		return &Summary{Type: event.Done.Name(), RequestID: d.RequestID, TenantID: d.TenantID}, false
	}
	var rc event.Receipt
	if reg.Decode(ctx, event.Completed, v, &rc) == nil {
		return &Summary{Type: event.Completed.Name(), RequestID: rc.RequestID, TenantID: rc.TenantID}, false
	}
	var in event.IntakeRequest
	if reg.Decode(ctx, event.Intake, v, &in) == nil {
		placeholders := IsPlaceholder(in.SubjectID)
		for _, id := range in.SessionIDs {
			placeholders = placeholders || IsPlaceholder(id)
		}
		return &Summary{Type: event.Intake.Name(), TenantID: in.TenantID}, placeholders
	}
	return nil, false
}

// scan reads topic's partitions from from[p] (or, for partitions not in from, their first
// retained record) up to the end offsets listed when it starts, calling fn with each
// record in offset order per partition. fn returns false to stop reading that partition;
// an error from fn ends the scan.
func scan(ctx context.Context, brokers broker.Config, topic string, from map[int32]int64, fn func(*kgo.Record) (bool, error)) error {
	ends, err := endOffsets(ctx, brokers, topic, from)
	if err != nil || len(ends) == 0 {
		return err
	}
	assign := map[int32]kgo.Offset{}
	for p := range ends {
		if o, ok := from[p]; ok {
			assign[p] = kgo.NewOffset().At(o)
		} else {
			assign[p] = kgo.NewOffset().AtStart()
		}
	}
	cl, err := kgo.NewClient(append(brokers.Options(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: assign}),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	for len(ends) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%d partitions not read to their end: %w", len(ends), err)
		}
		var ferr error
		fs.EachError(func(_ string, p int32, err error) {
			if !kerr.IsRetriable(err) && ferr == nil {
				ferr = fmt.Errorf("fetch partition %d: %w", p, err)
			}
		})
		if ferr != nil {
			return ferr
		}
		for _, r := range fs.Records() {
			end, reading := ends[r.Partition]
			if !reading || r.Offset >= end {
				continue
			}
			more, err := fn(r)
			if err != nil {
				return err
			}
			if !more || r.Offset >= end-1 {
				delete(ends, r.Partition)
			}
		}
	}
	return nil
}

// endOffsets returns the end offset of every partition of topic with records at or after
// from[p] (or its start offset).
func endOffsets(ctx context.Context, brokers broker.Config, topic string, from map[int32]int64) (map[int32]int64, error) {
	cl, err := kgo.NewClient(brokers.Options()...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list start offsets: %w", err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list end offsets: %w", err)
	}
	out := map[int32]int64{}
	for p, o := range ends[topic] {
		first := starts[topic][p].Offset
		if f, ok := from[p]; ok && f > first {
			first = f
		}
		if first < o.Offset {
			out[p] = o.Offset
		}
	}
	return out, nil
}
