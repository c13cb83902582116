package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/lethe-erasure/lethe/pkg/broker"
	"github.com/lethe-erasure/lethe/pkg/service"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

// topicsCLI runs lethectl against the cluster of b.
func topicsCLI(t *testing.T, b broker.Config, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cl := &cli{getenv: func(string) string { return "" }, stdin: strings.NewReader(""), isTTY: func() bool { return false },
		stdout: &stdout, stderr: &stderr, brokers: &b}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code := cl.run(ctx, args)
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// TestTopicsApply: --dry-run prints the plan for every topic the services use and creates
// nothing; apply creates them with the planned partitions, replication factor,
// min.insync.replicas, retention and cleanup policy (read back with kadm); a second run
// finds every topic as planned.
func TestTopicsApply(t *testing.T) {
	c := testenv.KafkaEmpty(t, 3, service.Topics...)
	adm := kadm.NewClient(testenv.Producer(t, c))
	list := func() kadm.TopicDetails {
		d, err := adm.ListTopics(kadm.WithAuthorizedOps(t.Context()), service.Topics...)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}

	r := topicsCLI(t, c, "topics", "apply", "--dry-run", "--partitions", "4", "--retention", "2000h")
	wantCode(t, r, exitOK)
	for _, topic := range service.Topics {
		if !strings.Contains(r.stdout, topic+" ") {
			t.Errorf("the plan does not show %s:\n%s", topic, r.stdout)
		}
	}
	n := len(service.Topics)
	if !strings.Contains(r.stdout, fmt.Sprintf("dry run, nothing changed: %d topics, %d to create", n, n)) {
		t.Errorf("dry run summary:\n%s", r.stdout)
	}
	for name, d := range list() {
		if d.Err == nil {
			t.Errorf("the dry run created %s", name)
		}
	}

	r = topicsCLI(t, c, "topics", "apply", "--partitions", "4", "--retention", "2000h", "-o", "json")
	wantCode(t, r, exitOK)
	var applied []topicChange
	if err := json.Unmarshal([]byte(r.stdout), &applied); err != nil {
		t.Fatalf("%v: %s", err, r.stdout)
	}
	var planned []string
	for _, ch := range applied {
		planned = append(planned, ch.Topic)
	}
	slices.Sort(planned)
	if want := slices.Sorted(slices.Values(service.Topics)); !slices.Equal(planned, want) {
		t.Errorf("planned topics %v, want the services' %v", planned, want)
	}
	details := list()
	configs, err := adm.DescribeTopicConfigs(t.Context(), service.Topics...)
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range applied {
		d := details[ch.Topic]
		if d.Err != nil || len(d.Partitions) != 4 || d.Partitions.NumReplicas() != 3 {
			t.Errorf("%s: %v, %d partitions, %d replicas; want 4 partitions of 3 replicas", ch.Topic, d.Err, len(d.Partitions), d.Partitions.NumReplicas())
		}
		rc, err := configs.On(ch.Topic, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, cfg := range rc.Configs {
			if cfg.Value != nil {
				got[cfg.Key] = *cfg.Value
			}
		}
		want := map[string]string{"min.insync.replicas": "2", "cleanup.policy": "delete", "retention.ms": "7200000000"}
		switch ch.Topic {
		case "erasure.intake", "erasure.intake.dlq":
			want["retention.ms"] = "86400000"
		case "erasure.completed", "erasure.suppressions":
			want["cleanup.policy"], want["retention.ms"] = "compact", "-1"
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: %s = %q, want %q", ch.Topic, k, got[k], v)
			}
		}
	}

	r = topicsCLI(t, c, "topics", "apply", "--partitions", "4", "--retention", "2000h")
	wantCode(t, r, exitOK)
	if !strings.Contains(r.stdout, fmt.Sprintf("applied: %d topics, 0 to create, 0 to update, %d as planned", n, n)) {
		t.Errorf("second apply:\n%s", r.stdout)
	}
}

func TestTopicsApplyRefusesBadSettings(t *testing.T) {
	c := testenv.KafkaEmpty(t, 1, service.Topics...)
	m, err := kadm.NewClient(testenv.Producer(t, c)).BrokerMetadata(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, topicsCLI(t, c, "topics", "apply", "--replication-factor", "1", "--min-insync-replicas", "2"), exitUsage)
	// More replicas than the cluster has brokers: the create is refused, the exit says so.
	r := topicsCLI(t, c, "topics", "apply", "--replication-factor", strconv.Itoa(len(m.Brokers)+1))
	if r.code != exitError || !strings.Contains(r.stderr, "INVALID_REPLICATION_FACTOR") {
		t.Errorf("replication %d on %d brokers: %s", len(m.Brokers)+1, len(m.Brokers), r)
	}
	wantCode(t, topicsCLI(t, c, "topics", "apply", "--replication-factor", "1", "--min-insync-replicas", "1"), exitOK)
}
