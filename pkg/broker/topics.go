package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/lethe-erasure/lethe/pkg/event"
)

// TopicSpec is how one topic is provisioned: its partitions, replication factor and topic
// configs (cleanup.policy, retention.ms, min.insync.replicas).
type TopicSpec struct {
	Name              string
	Partitions        int32
	ReplicationFactor int16
	Configs           map[string]string
}

// Provisioning are the settings Lethe's topics are planned with.
type Provisioning struct {
	Partitions        int32
	ReplicationFactor int16
	MinInsyncReplicas int
	// IntakeRetention is how long erasure.intake and erasure.intake.dlq keep records. They
	// hold raw identifiers in the clear, so it is short: long enough to ride out an intake
	// outage and to read a dead letter, no longer.
	IntakeRetention time.Duration
	// Retention is how long every other event topic keeps records: at least the longest
	// legal window plus a margin, so that a request can be re-driven and its audit trail
	// replayed (erasure.requested holds sealed identifiers only).
	Retention time.Duration
}

// DefaultRetentionMargin is what Plan's callers add to the longest legal window.
const DefaultRetentionMargin = 30 * 24 * time.Hour

// DefaultProvisioning is a three-broker cluster's plan: replication factor 3 and
// min.insync.replicas 2 (so acks=all survives one broker down and refuses writes with
// two), 6 partitions, erasure.intake kept 24 hours, the other topics longest plus the
// default margin.
func DefaultProvisioning(longest time.Duration) Provisioning {
	return Provisioning{Partitions: 6, ReplicationFactor: 3, MinInsyncReplicas: 2,
		IntakeRetention: 24 * time.Hour, Retention: longest + DefaultRetentionMargin}
}

// Validate reports settings no cluster accepts or that make acks=all protect nothing
// silently: min.insync.replicas above the replication factor.
func (p Provisioning) Validate() error {
	switch {
	case p.Partitions <= 0:
		return errors.New("broker: partitions must be positive")
	case p.ReplicationFactor <= 0:
		return errors.New("broker: replication factor must be positive")
	case p.MinInsyncReplicas <= 0 || p.MinInsyncReplicas > int(p.ReplicationFactor):
		return fmt.Errorf("broker: min.insync.replicas %d must be between 1 and the replication factor %d", p.MinInsyncReplicas, p.ReplicationFactor)
	case p.IntakeRetention <= 0 || p.Retention <= 0:
		return errors.New("broker: retentions must be positive")
	}
	return nil
}

// Plan returns the spec of every topic Lethe uses. erasure.completed, one receipt per
// request id, and erasure.suppressions, the latest entry per tenant and pseudonym, are
// keyed state: compacted and kept forever. The other topics are event logs deleted after
// their retention.
func Plan(p Provisioning) []TopicSpec {
	spec := func(name string, configs map[string]string) TopicSpec {
		configs["min.insync.replicas"] = strconv.Itoa(p.MinInsyncReplicas)
		return TopicSpec{Name: name, Partitions: p.Partitions, ReplicationFactor: p.ReplicationFactor, Configs: configs}
	}
	deleteAfter := func(d time.Duration) map[string]string {
		return map[string]string{"cleanup.policy": "delete", "retention.ms": strconv.FormatInt(d.Milliseconds(), 10)}
	}
	return []TopicSpec{
		spec(event.TopicIntake, deleteAfter(p.IntakeRetention)),
		spec(event.DLQ(event.TopicIntake), deleteAfter(p.IntakeRetention)),
		spec(event.TopicRequested, deleteAfter(p.Retention)),
		spec(event.DLQ(event.TopicRequested), deleteAfter(p.Retention)),
		spec(event.TopicStoreDone, deleteAfter(p.Retention)),
		spec(event.TopicStoreFound, deleteAfter(p.Retention)),
		spec(event.DLQ(event.TopicStoreDone), deleteAfter(p.Retention)),
		spec(event.DLQ(event.TopicStoreFound), deleteAfter(p.Retention)),
		spec(event.TopicCompleted, map[string]string{"cleanup.policy": "compact", "retention.ms": "-1"}),
		spec(event.TopicOverdue, deleteAfter(p.Retention)),
		spec(event.TopicSuppressions, map[string]string{"cleanup.policy": "compact", "retention.ms": "-1"}),
		spec(event.TopicReappeared, deleteAfter(p.Retention)),
	}
}

// Topic actions of a TopicChange.
const (
	TopicOK      = "ok"      // exists as planned
	TopicCreate  = "create"  // missing: created
	TopicUpdate  = "update"  // exists with other partitions or configs: changed
	TopicProblem = "problem" // differs in a way Apply does not change (replication factor)
)

// TopicChange is what Apply did, or in a dry run would do, to one topic.
type TopicChange struct {
	Spec   TopicSpec
	Action string
	Detail []string // the differences found, e.g. "retention.ms 604800000 -> 6480000000"
}

// ApplyTopics creates the missing topics of specs and brings existing ones to their spec:
// more partitions (never fewer) and the planned configs. With dryRun it changes nothing and
// returns what it would do. A replication factor that differs is reported as a problem
// (changing it is a partition reassignment) and makes the error non-nil, as does any
// refused change.
func ApplyTopics(ctx context.Context, adm *kadm.Client, specs []TopicSpec, dryRun bool) ([]TopicChange, error) {
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.Name
	}
	details, err := listFresh(ctx, adm, names)
	if err != nil {
		return nil, fmt.Errorf("broker: list topics: %w", err)
	}
	var existing []string
	for _, n := range names {
		if d, ok := details[n]; ok && d.Err == nil {
			existing = append(existing, n)
		} else if ok && !errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
			return nil, fmt.Errorf("broker: describe topic %s: %w", n, d.Err)
		}
	}
	configs := kadm.ResourceConfigs{}
	if len(existing) > 0 {
		if configs, err = adm.DescribeTopicConfigs(ctx, existing...); err != nil {
			return nil, fmt.Errorf("broker: describe topic configs: %w", err)
		}
	}
	var changes []TopicChange
	var errs []error
	for _, s := range specs {
		ch := TopicChange{Spec: s, Action: TopicOK}
		d, exists := details[s.Name]
		if !exists || d.Err != nil {
			ch.Action = TopicCreate
			if !dryRun {
				errs = append(errs, createTopic(ctx, adm, s))
			}
			changes = append(changes, ch)
			continue
		}
		var alter []kadm.AlterConfig
		rc, _ := configs.On(s.Name, nil)
		for _, k := range sortedKeys(s.Configs) {
			have := ""
			for _, c := range rc.Configs {
				if c.Key == k && c.Value != nil {
					have = *c.Value
				}
			}
			if have != s.Configs[k] {
				ch.Detail = append(ch.Detail, fmt.Sprintf("%s %s -> %s", k, orNone(have), s.Configs[k]))
				alter = append(alter, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: kadm.StringPtr(s.Configs[k])})
			}
		}
		parts := int32(len(d.Partitions))
		if parts < s.Partitions {
			ch.Detail = append(ch.Detail, fmt.Sprintf("partitions %d -> %d", parts, s.Partitions))
		} else if parts > s.Partitions {
			ch.Detail = append(ch.Detail, fmt.Sprintf("partitions %d, more than the planned %d: kept (partitions never shrink)", parts, s.Partitions))
		}
		if len(ch.Detail) > 0 {
			ch.Action = TopicUpdate
		}
		if rf := d.Partitions.NumReplicas(); rf != int(s.ReplicationFactor) {
			ch.Action = TopicProblem
			ch.Detail = append(ch.Detail, fmt.Sprintf("replication factor %d, want %d: reassign its partitions", rf, s.ReplicationFactor))
			errs = append(errs, fmt.Errorf("broker: topic %s has replication factor %d, want %d", s.Name, rf, s.ReplicationFactor))
		}
		if !dryRun {
			if len(alter) > 0 {
				resp, err := adm.AlterTopicConfigs(ctx, alter, s.Name)
				errs = append(errs, alterErr(s.Name, resp, err))
			}
			if parts < s.Partitions {
				resp, err := adm.UpdatePartitions(ctx, int(s.Partitions), s.Name)
				if err == nil {
					err = resp.Error()
				}
				if err != nil {
					errs = append(errs, fmt.Errorf("broker: add partitions to %s: %w", s.Name, err))
				}
			}
		}
		changes = append(changes, ch)
	}
	return changes, errors.Join(errs...)
}

// listFresh lists topics with a metadata request of its own: kadm otherwise answers from
// the client's metadata cache (up to 5 s old), which misses a topic created meanwhile.
// Asking for the authorized operations is what makes kadm bypass the cache.
func listFresh(ctx context.Context, adm *kadm.Client, names []string) (kadm.TopicDetails, error) {
	return adm.ListTopics(kadm.WithAuthorizedOps(ctx), names...)
}

func createTopic(ctx context.Context, adm *kadm.Client, s TopicSpec) error {
	cfg := make(map[string]*string, len(s.Configs))
	for k, v := range s.Configs {
		cfg[k] = kadm.StringPtr(v)
	}
	_, err := adm.CreateTopic(ctx, s.Partitions, s.ReplicationFactor, cfg, s.Name)
	if err != nil {
		return fmt.Errorf("broker: create topic %s: %w", s.Name, err)
	}
	return nil
}

func alterErr(topic string, resp kadm.AlterConfigsResponses, err error) error {
	if err == nil {
		for _, r := range resp {
			if r.Err != nil {
				err = r.Err
			}
		}
	}
	if err != nil {
		return fmt.Errorf("broker: alter configs of %s: %w", topic, err)
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func orNone(s string) string {
	if s == "" {
		return "(unset)"
	}
	return s
}
