package broker_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/lethe-erasure/lethe/pkg/broker"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

// readBack returns, per topic of specs, the partitions, replication factor and the planned
// configs as the cluster reports them.
func readBack(t *testing.T, adm *kadm.Client, specs []broker.TopicSpec) map[string]broker.TopicSpec {
	t.Helper()
	var names []string
	for _, s := range specs {
		names = append(names, s.Name)
	}
	details, err := adm.ListTopics(kadm.WithAuthorizedOps(t.Context()), names...) // uncached
	if err != nil {
		t.Fatal(err)
	}
	configs, err := adm.DescribeTopicConfigs(t.Context(), names...)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]broker.TopicSpec{}
	for _, s := range specs {
		d := details[s.Name]
		if d.Err != nil {
			continue
		}
		got := broker.TopicSpec{Name: s.Name, Partitions: int32(len(d.Partitions)), ReplicationFactor: int16(d.Partitions.NumReplicas()), Configs: map[string]string{}}
		rc, err := configs.On(s.Name, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range rc.Configs {
			if _, planned := s.Configs[c.Key]; planned && c.Value != nil {
				got.Configs[c.Key] = *c.Value
			}
		}
		out[s.Name] = got
	}
	return out
}

func sameSpec(a, b broker.TopicSpec) bool {
	if a.Name != b.Name || a.Partitions != b.Partitions || a.ReplicationFactor != b.ReplicationFactor || len(a.Configs) != len(b.Configs) {
		return false
	}
	for k, v := range a.Configs {
		if b.Configs[k] != v {
			return false
		}
	}
	return true
}

func TestPlan(t *testing.T) {
	p := broker.DefaultProvisioning(45 * 24 * time.Hour)
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	byName := map[string]broker.TopicSpec{}
	for _, s := range broker.Plan(p) {
		byName[s.Name] = s
		if s.Configs["min.insync.replicas"] != "2" || s.ReplicationFactor != 3 || s.Partitions != 6 {
			t.Errorf("%s: %+v, want replication 3, min.insync.replicas 2, 6 partitions", s.Name, s)
		}
	}
	ms := func(name string) time.Duration {
		n, err := strconv.ParseInt(byName[name].Configs["retention.ms"], 10, 64)
		if err != nil {
			t.Fatalf("%s retention.ms: %v", name, err)
		}
		return time.Duration(n) * time.Millisecond
	}
	for _, name := range []string{event.TopicIntake, event.DLQ(event.TopicIntake)} {
		if d := ms(name); d > 7*24*time.Hour {
			t.Errorf("%s keeps raw identifiers %s, want a short retention", name, d)
		}
	}
	if d := ms(event.TopicRequested); d < 45*24*time.Hour+7*24*time.Hour {
		t.Errorf("erasure.requested retention %s, want the longest legal window (45 days) plus a margin", d)
	}
	if c := byName[event.TopicCompleted].Configs; c["cleanup.policy"] != "compact" || c["retention.ms"] != "-1" {
		t.Errorf("erasure.completed (one receipt per request id) configs %v, want compacted and kept", c)
	}
	if c := byName[event.TopicSuppressions].Configs; c["cleanup.policy"] != "compact" || c["retention.ms"] != "-1" {
		t.Errorf("erasure.suppressions (the latest entry per pseudonym) configs %v, want compacted and kept", c)
	}
	for _, bad := range []broker.Provisioning{
		{Partitions: 6, ReplicationFactor: 1, MinInsyncReplicas: 2, IntakeRetention: time.Hour, Retention: time.Hour},
		{Partitions: 0, ReplicationFactor: 1, MinInsyncReplicas: 1, IntakeRetention: time.Hour, Retention: time.Hour},
		{Partitions: 6, ReplicationFactor: 3, MinInsyncReplicas: 0, IntakeRetention: time.Hour, Retention: time.Hour},
	} {
		if bad.Validate() == nil {
			t.Errorf("Validate accepts %+v", bad)
		}
	}
}

// On a three-broker cluster, a dry run changes nothing; applying creates every topic with
// its planned partitions, replication factor and configs (read back with kadm); a second
// apply finds nothing to do; a drifted config is put back; a topic with another
// replication factor is reported as a problem.
func TestApplyTopics(t *testing.T) {
	specs := broker.Plan(broker.DefaultProvisioning(45 * 24 * time.Hour))
	var names []string
	for _, s := range specs {
		names = append(names, s.Name)
	}
	cl := testenv.Producer(t, testenv.KafkaEmpty(t, 3, append(names, "single")...))
	adm := kadm.NewClient(cl)

	changes, err := broker.ApplyTopics(t.Context(), cl, specs, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range changes {
		if ch.Action != broker.TopicCreate {
			t.Errorf("dry run on an empty cluster: %s %s, want create", ch.Spec.Name, ch.Action)
		}
	}
	if got := readBack(t, adm, specs); len(got) != 0 {
		t.Fatalf("the dry run created %d topics", len(got))
	}

	if _, err := broker.ApplyTopics(t.Context(), cl, specs, false); err != nil {
		t.Fatalf("apply: %v", err)
	}
	got := readBack(t, adm, specs)
	for _, s := range specs {
		if !sameSpec(got[s.Name], s) {
			t.Errorf("%s read back as %+v, want %+v", s.Name, got[s.Name], s)
		}
	}
	changes, err = broker.ApplyTopics(t.Context(), cl, specs, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range changes {
		if ch.Action != broker.TopicOK {
			t.Errorf("second apply: %s %s %v, want ok", ch.Spec.Name, ch.Action, ch.Detail)
		}
	}

	if _, err := adm.AlterTopicConfigs(t.Context(), []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("1000")}}, event.TopicRequested); err != nil {
		t.Fatal(err)
	}
	changes, err = broker.ApplyTopics(t.Context(), cl, specs, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range changes {
		if want := broker.TopicOK; ch.Spec.Name == event.TopicRequested {
			if ch.Action != broker.TopicUpdate || !strings.Contains(strings.Join(ch.Detail, ";"), "retention.ms 1000 -> ") {
				t.Errorf("drifted retention: %s %v, want update of retention.ms", ch.Action, ch.Detail)
			}
		} else if ch.Action != want {
			t.Errorf("%s: %s, want ok", ch.Spec.Name, ch.Action)
		}
	}
	if got := readBack(t, adm, specs)[event.TopicRequested]; !sameSpec(got, specs[2]) {
		t.Errorf("erasure.requested after the update: %+v, want %+v", got, specs[2])
	}

	if _, err := adm.CreateTopic(t.Context(), 6, 1, nil, "single"); err != nil {
		t.Fatal(err)
	}
	odd := []broker.TopicSpec{{Name: "single", Partitions: 6, ReplicationFactor: 3, Configs: map[string]string{}}}
	changes, err = broker.ApplyTopics(t.Context(), cl, odd, false)
	if err == nil || changes[0].Action != broker.TopicProblem {
		t.Errorf("topic with replication factor 1 planned for 3: %v, %v; want a problem and an error", changes, err)
	}
}
