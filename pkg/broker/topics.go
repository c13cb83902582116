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
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

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
// refused change. It returns once every broker shows the changes (a broker learns of them
// from the controller a moment after the controller accepted them, each at its own pace),
// so that the next reader sees them, whichever broker it asks.
func ApplyTopics(ctx context.Context, cl *kgo.Client, specs []TopicSpec, dryRun bool) ([]TopicChange, error) {
	adm := kadm.NewClient(cl)
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
		d, exists := details[s.Name]
		rc, rcErr := configs.On(s.Name, nil)
		if exists && d.Err == nil && (rcErr != nil || rc.Err != nil) {
			// Listed by one broker, its configs asked of another that has not learnt of it yet.
			var err error
			if d, rc, err = describeTopic(ctx, adm, s.Name); err != nil {
				errs = append(errs, err)
				changes = append(changes, TopicChange{Spec: s, Action: TopicProblem})
				continue
			}
		}
		if !exists || d.Err != nil {
			if dryRun {
				changes = append(changes, TopicChange{Spec: s, Action: TopicCreate})
				continue
			}
			err := createTopic(ctx, adm, s)
			if !errors.Is(err, kerr.TopicAlreadyExists) {
				errs = append(errs, err)
				changes = append(changes, TopicChange{Spec: s, Action: TopicCreate})
				continue
			}
			// It exists after all: created meanwhile, or listed by a broker that had not
			// learnt of it yet. Compare it as an existing topic.
			if d, rc, err = describeTopic(ctx, adm, s.Name); err != nil {
				errs = append(errs, err)
				changes = append(changes, TopicChange{Spec: s, Action: TopicCreate})
				continue
			}
		}
		ch, err := reconcile(ctx, adm, s, d, rc, dryRun)
		errs = append(errs, err)
		changes = append(changes, ch)
	}
	if err := errors.Join(errs...); err != nil || dryRun {
		return changes, err
	}
	var changed []TopicSpec
	for _, ch := range changes {
		if ch.Action == TopicCreate || ch.Action == TopicUpdate {
			changed = append(changed, ch.Spec)
		}
	}
	return changes, awaitTopics(ctx, cl, changed)
}

// reconcile compares the existing topic d, with its configs rc, to s and, unless dryRun,
// alters its configs and adds partitions to match.
func reconcile(ctx context.Context, adm *kadm.Client, s TopicSpec, d kadm.TopicDetail, rc kadm.ResourceConfig, dryRun bool) (TopicChange, error) {
	ch := TopicChange{Spec: s, Action: TopicOK}
	var errs []error
	var alter []kadm.AlterConfig
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
	return ch, errors.Join(errs...)
}

// describeTopic waits until the cluster lists the topic name and returns its detail and
// configs.
func describeTopic(ctx context.Context, adm *kadm.Client, name string) (kadm.TopicDetail, kadm.ResourceConfig, error) {
	for {
		details, err := listFresh(ctx, adm, []string{name})
		if err != nil {
			return kadm.TopicDetail{}, kadm.ResourceConfig{}, fmt.Errorf("broker: list topic %s: %w", name, err)
		}
		if d := details[name]; d.Err == nil {
			configs, err := adm.DescribeTopicConfigs(ctx, name)
			if err != nil {
				return d, kadm.ResourceConfig{}, fmt.Errorf("broker: describe topic configs of %s: %w", name, err)
			}
			if rc, err := configs.On(name, nil); err == nil && rc.Err == nil {
				return d, rc, nil
			}
		}
		select {
		case <-ctx.Done():
			return kadm.TopicDetail{}, kadm.ResourceConfig{}, fmt.Errorf("broker: topic %s exists but is not listed: %w", name, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// awaitTopics waits until every broker of the cluster shows every spec: its partitions (at
// least), each with a leader, and its configs.
func awaitTopics(ctx context.Context, cl *kgo.Client, specs []TopicSpec) error {
	if len(specs) == 0 {
		return nil
	}
	meta, err := kadm.NewClient(cl).BrokerMetadata(ctx)
	if err != nil {
		return fmt.Errorf("broker: list brokers: %w", err)
	}
	for _, b := range meta.Brokers {
		for {
			pending, err := notShown(ctx, cl.Broker(int(b.NodeID)), specs)
			if err != nil {
				return fmt.Errorf("broker: read topics back from broker %d: %w", b.NodeID, err)
			}
			if pending == "" {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("broker: broker %d does not show topic %s as applied yet: %w", b.NodeID, pending, ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

// notShown returns the first spec whose partitions, leaders or configs broker b does not
// show yet, "" when it shows them all.
func notShown(ctx context.Context, b *kgo.Broker, specs []TopicSpec) (string, error) {
	mreq := kmsg.NewPtrMetadataRequest()
	creq := kmsg.NewPtrDescribeConfigsRequest()
	for _, s := range specs {
		t := kmsg.NewMetadataRequestTopic()
		t.Topic = kmsg.StringPtr(s.Name)
		mreq.Topics = append(mreq.Topics, t)
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, s.Name
		creq.Resources = append(creq.Resources, r)
	}
	mresp, err := mreq.RequestWith(ctx, b)
	if err != nil {
		return "", err
	}
	cresp, err := creq.RequestWith(ctx, b)
	if err != nil {
		return "", err
	}
	led := map[string]int32{} // topic -> partitions with a leader
	for _, t := range mresp.Topics {
		if t.Topic != nil && t.ErrorCode == 0 {
			for _, p := range t.Partitions {
				if p.ErrorCode == 0 && p.Leader >= 0 {
					led[*t.Topic]++
				}
			}
		}
	}
	configs := map[string]map[string]string{}
	for _, r := range cresp.Resources {
		if r.ErrorCode == 0 {
			configs[r.ResourceName] = map[string]string{}
			for _, c := range r.Configs {
				if c.Value != nil {
					configs[r.ResourceName][c.Name] = *c.Value
				}
			}
		}
	}
	for _, s := range specs {
		have, ok := configs[s.Name]
		if led[s.Name] < s.Partitions || !ok {
			return s.Name, nil
		}
		for k, v := range s.Configs {
			if have[k] != v {
				return s.Name, nil
			}
		}
	}
	return "", nil
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
