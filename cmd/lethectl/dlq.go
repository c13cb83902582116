package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/apiclient"
	"github.com/lethe-erasure/lethe/pkg/broker"
	"github.com/lethe-erasure/lethe/pkg/dlq"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/intake"
	"github.com/lethe-erasure/lethe/pkg/schemareg"
	"github.com/lethe-erasure/lethe/pkg/service"
)

// brokerConfig is the injected broker configuration, else the environment's
// (LETHE_KAFKA_*) with --brokers overriding the seed brokers.
func (c *cli) brokerConfig() (broker.Config, error) {
	if c.brokers != nil {
		return *c.brokers, nil
	}
	cfg, err := broker.FromEnv("lethectl")
	if err != nil {
		return cfg, withCode(exitUsage, err)
	}
	if c.g.brokers != "" {
		cfg.Brokers = strings.Split(c.g.brokers, ",")
	}
	return cfg, nil
}

// brokerClient is a client of the broker configuration (brokerConfig); the caller closes it.
func (c *cli) brokerClient() (broker.Config, *kgo.Client, error) {
	cfg, err := c.brokerConfig()
	if err != nil {
		return cfg, nil, err
	}
	cl, err := cfg.NewProducer()
	return cfg, cl, err
}

// registry is the Schema Registry of LETHE_SCHEMA_REGISTRY_URL with the framings of
// LETHE_FRAMING, as the services read them (schemareg.FromEnv); nil without one, which
// reads and writes single-object records only.
func (c *cli) registry(ctx context.Context) (*schemareg.Codec, error) {
	reg, err := schemareg.FromEnv(ctx, c.getenv)
	if err != nil {
		return nil, fmt.Errorf("schema registry: %w", err)
	}
	return reg, nil
}

// dlqTopics are the dead-letter topics of Lethe's topics.
func dlqTopics() []string {
	var out []string
	for _, t := range service.Topics {
		if strings.HasSuffix(t, ".dlq") {
			out = append(out, t)
		}
	}
	return out
}

// dlqTopic is topic's dead-letter topic: topic itself when it ends in ".dlq".
func dlqTopic(topic string) string {
	if strings.HasSuffix(topic, ".dlq") {
		return topic
	}
	return topic + ".dlq"
}

// brokerErr classifies an error of a broker operation under a --timeout.
func brokerErr(ctx context.Context, cfg broker.Config, timeout time.Duration, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, kerr.UnknownTopicOrPartition):
		return withCode(exitNotFound, err)
	case ctx.Err() != nil && errors.Is(err, context.DeadlineExceeded):
		return withCode(exitTimeout, fmt.Errorf("no answer from the brokers %s within %s: %w", cfg, timeout, err))
	}
	return err
}

var dlqListCmd = &command{
	name:    "dlq list",
	args:    "[TOPIC]... [--limit N]",
	summary: "show dead-lettered records: source, reason, time, event type",
	help: `Lists the records of dead-letter topics without their payload: for each, where it came
from (source topic/partition/offset), why it was dead-lettered, when, by which consumer
group, and what it is (event type, request id and tenant, when it decodes as a Lethe
event). A record that failed again after a replay shows where it was replayed from and
by whom; an intake record names the producer its credential authenticated, and a
redacted one (identifiers replaced by placeholders) is marked: it cannot be replayed.

TOPIC is a dead-letter topic (erasure.intake.dlq) or its source topic (erasure.intake);
default: every dead-letter topic of Lethe's topics. Reads from the first retained record
to the end offsets seen at the start, without a consumer group; commits nothing.`,
	example: `lethectl dlq list --brokers 127.0.0.1:9092
lethectl dlq list erasure.requested --limit 20 -o json | jq '.[].entries[].reason'`,
	exits: "0 listed (also when empty); 1 error; 2 usage; 3 no such topic; 5 --timeout passed.",
	setup: func(c *cli, fs *flag.FlagSet) func(context.Context, []string) error {
		var limit int
		var timeout time.Duration
		fs.IntVar(&limit, "limit", 100, "at most this many records per topic (0: all)")
		fs.DurationVar(&timeout, "timeout", 30*time.Second, "give up (exit 5) after this long")
		return func(ctx context.Context, args []string) error {
			if limit < 0 {
				return usageErrorf("--limit must not be negative")
			}
			topics := dlqTopics()
			if len(args) > 0 {
				topics = nil
				for _, a := range args {
					topics = append(topics, dlqTopic(a))
				}
			}
			cfg, err := c.brokerConfig()
			if err != nil {
				return err
			}
			reg, err := c.registry(ctx)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			type listed struct {
				Topic   string      `json:"topic"`
				Entries []dlq.Entry `json:"entries"`
			}
			var out []listed
			for _, t := range topics {
				es, err := dlq.List(ctx, cfg, reg, t, limit)
				if err != nil {
					return brokerErr(ctx, cfg, timeout, err)
				}
				out = append(out, listed{Topic: t, Entries: append([]dlq.Entry{}, es...)})
			}
			if c.json("table") {
				return printJSON(c.stdout, out)
			}
			for i, l := range out {
				if i > 0 {
					fmt.Fprintln(c.stdout)
				}
				if err := printEntries(c, l.Topic, l.Entries); err != nil {
					return err
				}
			}
			return nil
		}
	},
}

func printEntries(c *cli, topic string, es []dlq.Entry) error {
	fmt.Fprintf(c.stdout, "%s: %d records\n", topic, len(es))
	if len(es) == 0 {
		return nil
	}
	tw := table(c.stdout)
	fmt.Fprintln(tw, "PART/OFFSET\tSOURCE\tAT\tGROUP\tTYPE\tREQUEST\tTENANT\tREASON")
	for _, e := range es {
		typ, req, tenant := "-", "-", "-"
		if e.Event != nil {
			typ, tenant = e.Event.Type, e.Event.TenantID
			if e.Event.RequestID != "" {
				req = e.Event.RequestID
			}
		}
		reason := e.Reason
		if e.ReplayedFrom != "" {
			reason += " (again, after replay of " + e.ReplayedFrom
			if e.ReplayedBy != "" {
				reason += " by " + e.ReplayedBy
			}
			reason += ")"
		}
		if e.Principal != "" {
			reason += " [producer " + e.Principal + "]"
		}
		if e.Redacted {
			reason += " [redacted: not replayable]"
		}
		fmt.Fprintf(tw, "%d/%d\t%s/%d/%d\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Partition, e.Offset, e.SourceTopic, e.SourcePartition, e.SourceOffset,
			formatTime(e.At), e.Group, typ, req, tenant, reason)
	}
	return tw.Flush()
}

var dlqReplayCmd = &command{
	name:    "dlq replay",
	args:    "TOPIC [--reason SUBSTR] [--request ID] [--yes]",
	summary: "republish dead-lettered records to their source topic",
	help: `Republishes the records of a dead-letter topic to their source topic once the cause is
fixed, with their key and value, their content-type header (no other header: never a
credential), a lethe.replayed-from header and a lethe.replayed-by header naming who
replayed (lethectl: and the SASL user of the brokers, else the local user). --reason and
--request select records; without them every record is replayed. Progress is kept in
the consumer group lethe-dlq-replay: a record replayed once is not replayed again by a
later run (a record that fails again is dead-lettered anew, as a new record). Runs on
the same topic must not overlap.

Records of erasure.intake.dlq are replayed through the intake API (--server, --token),
one by one, as requests of the token's principal, which must be allowed to act for each
record's tenant: they pass the intake's validation, gates and idempotency keys like any
submission. Intake producers authenticate by a record header, which dead letters do not
keep, so these records are never written back to erasure.intake.

A redacted dead letter (identifiers replaced by placeholders) is refused: replaying it
would erase the placeholder under the producer's idempotency key, so the producer must
submit the request again. Refused records are listed with the reason and stay.

On a terminal it shows how many records match and asks for confirmation; elsewhere it
refuses unless --yes is given. It prints how many records it republished and which it
refused, and why.`,
	example: `lethectl dlq replay erasure.requested.dlq --reason "store unavailable" --yes
lethectl dlq replay erasure.store.done --request er_6ebc4c5fc7aee916243a000c4fb91673
lethectl dlq replay erasure.intake --reason unauthenticated --server https://lethe.example --token "$LETHE_TOKEN"`,
	exits: "0 replayed (also when nothing matched, or records were refused); 1 error, or the confirmation was declined; 2 usage, or no terminal and no --yes; 3 no such topic; 5 --timeout passed.",
	setup: func(c *cli, fs *flag.FlagSet) func(context.Context, []string) error {
		var reason, request string
		var yes bool
		var timeout time.Duration
		fs.StringVar(&reason, "reason", "", "only records whose reason contains this text")
		fs.StringVar(&request, "request", "", "only records of this request id")
		fs.BoolVar(&yes, "yes", false, "do not ask for confirmation")
		fs.DurationVar(&timeout, "timeout", 60*time.Second, "give up (exit 5) after this long")
		return func(ctx context.Context, args []string) error {
			if len(args) != 1 {
				return usageErrorf("one topic expected, got %d arguments", len(args))
			}
			topic := dlqTopic(args[0])
			viaIntake := topic == event.DLQ(event.TopicIntake)
			filter := func(e dlq.Entry) bool {
				return strings.Contains(e.Reason, reason) && (request == "" || e.Event != nil && e.Event.RequestID == request)
			}
			cfg, err := c.brokerConfig()
			if err != nil {
				return err
			}
			reg, err := c.registry(ctx)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			var matched []dlq.Entry
			if !yes || viaIntake {
				if !yes && !c.isTTY() {
					return usageErrorf("stdin is not a terminal: pass --yes to replay without confirmation")
				}
				es, err := dlq.List(ctx, cfg, reg, topic, 0)
				if err != nil {
					return brokerErr(ctx, cfg, timeout, err)
				}
				for _, e := range es {
					if filter(e) {
						matched = append(matched, e)
					}
				}
			}
			if !yes {
				if len(matched) == 0 {
					fmt.Fprintf(c.stdout, "no record of %s matches; nothing replayed\n", topic)
					return nil
				}
				sources := map[string]bool{}
				for _, e := range matched {
					sources[e.SourceTopic] = true
				}
				fmt.Fprintf(c.stderr, "%d records of %s match (records an earlier replay republished are skipped).\nRepublish them to %s? [y/N] ", len(matched), topic, strings.Join(keys(sources), ", "))
				answer, _ := bufio.NewReader(c.stdin).ReadString('\n')
				if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
					return errors.New("not confirmed; nothing replayed")
				}
			}
			var res dlq.Result
			if viaIntake {
				res, err = c.replayThroughIntake(ctx, topic, matched)
			} else {
				res, err = dlq.Replay(ctx, cfg, reg, topic, dlq.Options{Filter: filter, By: c.replayer()})
			}
			if err != nil {
				return brokerErr(ctx, cfg, timeout, fmt.Errorf("%d records replayed before: %w", res.Replayed, err))
			}
			if c.json("table") {
				return printJSON(c.stdout, map[string]any{"topic": topic, "replayed": res.Replayed, "refused": append([]dlq.Refusal{}, res.Refused...)})
			}
			fmt.Fprintf(c.stdout, "replayed %d records from %s\n", res.Replayed, topic)
			if len(res.Refused) > 0 {
				fmt.Fprintf(c.stdout, "refused %d records:\n", len(res.Refused))
				for _, r := range res.Refused {
					fmt.Fprintf(c.stdout, "  %d/%d: %s\n", r.Partition, r.Offset, r.Reason)
				}
			}
			return nil
		}
	},
}

// replayer names whoever replays over the brokers (dlq.Options.By): the SASL user lethectl
// connects as, else the local user.
func (c *cli) replayer() string {
	for _, k := range []string{"LETHE_KAFKA_SASL_USERNAME", "USER", "USERNAME"} {
		if v := c.getenv(k); v != "" {
			return "lethectl:" + v
		}
	}
	return "lethectl"
}

// replayThroughIntake asks the intake API to replay each of the dead letters es of topic
// as the token's principal, and returns how many it replayed and which it refused (an
// answer 403, 409 or 422, with the intake's reason). Any other failure ends it.
func (c *cli) replayThroughIntake(ctx context.Context, topic string, es []dlq.Entry) (dlq.Result, error) {
	res := dlq.Result{}
	cl, err := c.apiClient()
	if err != nil {
		return res, err
	}
	for _, e := range es {
		var out struct {
			Replayed int `json:"replayed"`
		}
		err := cl.Do(ctx, http.MethodPost, "/v1/dead-letters/replay", nil, nil, intake.ReplayRequest{Topic: topic, Partition: e.Partition, Offset: e.Offset}, &out)
		var ae *apiclient.APIError
		switch {
		case errors.As(err, &ae) && (ae.Status == http.StatusForbidden || ae.Status == http.StatusConflict || ae.Status == http.StatusUnprocessableEntity):
			res.Refused = append(res.Refused, dlq.Refusal{Partition: e.Partition, Offset: e.Offset, Reason: ae.Message, Err: err})
		case err != nil:
			return res, err
		default:
			res.Replayed += out.Replayed
		}
	}
	return res, nil
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
