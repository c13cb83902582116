package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/lethe-erasure/lethe/pkg/broker"
	"github.com/lethe-erasure/lethe/pkg/intake"
)

var topicsApplyCmd = &command{
	name:    "topics apply",
	args:    "[--dry-run] [--replication-factor N] [--min-insync-replicas N] [--partitions N] [--intake-retention D] [--retention D]",
	summary: "create or check every Lethe topic with its replication, min.insync.replicas, partitions and retention",
	help: `Provisions the topics Lethe uses, on purpose rather than with the broker's defaults:
every topic gets the replication factor, min.insync.replicas (so that acks=all means
something) and partitions given, and a retention of its own:

  erasure.intake, erasure.intake.dlq   --intake-retention (default 24h): they hold raw
                                       identifiers in the clear, so they are kept short
  erasure.completed                    compacted, kept forever: one receipt per request id
  every other topic                    --retention (default: the longest legal window of
                                       LETHE_SLA, 45 days by default, plus 30 days), so that
                                       a request can be re-driven and its trail replayed

A missing topic is created; an existing one gets the planned configs and, if it has fewer,
the planned partitions (partitions never shrink). A replication factor that differs is
reported as a problem and not changed (that is a partition reassignment). With --dry-run
it prints the plan and what it would change, and changes nothing.

Run it once per cluster before the services (the Kubernetes Job lethe-topics and the
compose service topics do), and run the services with LETHE_CREATE_TOPICS=false. The
principal needs CREATE and ALTER_CONFIGS on the topics; the services then need neither.`,
	example: `lethectl topics apply --dry-run --brokers kafka-0.kafka:9092
lethectl topics apply --replication-factor 1 --min-insync-replicas 1   # a one-broker cluster`,
	exits: "0 applied (or planned); 1 error, or the cluster refused a change; 2 usage; 4 a topic differs in a way apply does not change; 5 --timeout passed.",
	setup: func(c *cli, fs *flag.FlagSet) func(context.Context, []string) error {
		longest, slaErr := longestWindow()
		p := broker.DefaultProvisioning(longest)
		var dryRun bool
		var rf, minISR, partitions int
		var timeout time.Duration
		fs.BoolVar(&dryRun, "dry-run", false, "print the plan and the changes it needs; change nothing")
		fs.IntVar(&rf, "replication-factor", int(p.ReplicationFactor), "replicas of every partition")
		fs.IntVar(&minISR, "min-insync-replicas", p.MinInsyncReplicas, "min.insync.replicas of every topic (at most the replication factor)")
		fs.IntVar(&partitions, "partitions", int(p.Partitions), "partitions of every topic (the most consumers one group can run in parallel)")
		fs.DurationVar(&p.IntakeRetention, "intake-retention", p.IntakeRetention, "retention of erasure.intake and its dead-letter topic")
		fs.DurationVar(&p.Retention, "retention", p.Retention, "retention of every other topic except erasure.completed")
		fs.DurationVar(&timeout, "timeout", 30*time.Second, "give up (exit 5) after this long")
		return func(ctx context.Context, args []string) error {
			if len(args) > 0 {
				return usageErrorf("no arguments expected, got %q", args)
			}
			if slaErr != nil {
				return withCode(exitUsage, slaErr)
			}
			if rf > 32767 || partitions > 1<<20 {
				return usageErrorf("--replication-factor or --partitions out of range")
			}
			p.ReplicationFactor, p.MinInsyncReplicas, p.Partitions = int16(rf), minISR, int32(partitions)
			if err := p.Validate(); err != nil {
				return withCode(exitUsage, err)
			}
			cfg, cl, err := c.brokerClient()
			if err != nil {
				return err
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			changes, applyErr := broker.ApplyTopics(ctx, cl, broker.Plan(p), dryRun)
			if changes == nil && applyErr != nil {
				return brokerErr(ctx, cfg, timeout, applyErr)
			}
			if err := printTopicChanges(c, changes, dryRun); err != nil {
				return err
			}
			for _, ch := range changes {
				if ch.Action == broker.TopicProblem {
					return withCode(exitProblem, applyErr)
				}
			}
			return brokerErr(ctx, cfg, timeout, applyErr)
		}
	},
}

// longestWindow is the longest due-date window of LETHE_SLA (the intake's policy).
func longestWindow() (time.Duration, error) {
	policy, err := intake.PolicyFromEnv()
	if err != nil {
		return 0, err
	}
	var longest time.Duration
	for _, d := range policy {
		longest = max(longest, d)
	}
	return longest, nil
}

// topicChange is the JSON form of a broker.TopicChange.
type topicChange struct {
	Topic             string            `json:"topic"`
	Action            string            `json:"action"`
	Partitions        int32             `json:"partitions"`
	ReplicationFactor int16             `json:"replication_factor"`
	Configs           map[string]string `json:"configs"`
	Changes           []string          `json:"changes,omitempty"`
}

func printTopicChanges(c *cli, changes []broker.TopicChange, dryRun bool) error {
	if c.json("table") {
		out := make([]topicChange, len(changes))
		for i, ch := range changes {
			out[i] = topicChange{Topic: ch.Spec.Name, Action: ch.Action, Partitions: ch.Spec.Partitions,
				ReplicationFactor: ch.Spec.ReplicationFactor, Configs: ch.Spec.Configs, Changes: ch.Detail}
		}
		return printJSON(c.stdout, out)
	}
	tw := table(c.stdout)
	fmt.Fprintln(tw, "TOPIC\tACTION\tPARTITIONS\tREPLICAS\tMIN.INSYNC\tCLEANUP\tRETENTION\tCHANGES")
	counts := map[string]int{}
	for _, ch := range changes {
		s := ch.Spec
		counts[ch.Action]++
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n", s.Name, ch.Action, s.Partitions, s.ReplicationFactor,
			s.Configs["min.insync.replicas"], s.Configs["cleanup.policy"], retention(s.Configs["retention.ms"]), strings.Join(ch.Detail, "; "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	verb := "applied"
	if dryRun {
		verb = "dry run, nothing changed"
	}
	fmt.Fprintf(c.stdout, "%s: %d topics, %d to create, %d to update, %d as planned, %d with problems\n", verb, len(changes),
		counts[broker.TopicCreate], counts[broker.TopicUpdate], counts[broker.TopicOK], counts[broker.TopicProblem])
	return nil
}

// retention shows retention.ms as a duration ("forever" for -1).
func retention(ms string) string {
	n, err := strconv.ParseInt(ms, 10, 64)
	switch {
	case err != nil:
		return ms
	case n < 0:
		return "forever"
	}
	return fmtDur(time.Duration(n) * time.Millisecond)
}
