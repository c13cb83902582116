package broker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/broker"
)

func TestFromEnv(t *testing.T) {
	t.Setenv("LETHE_KAFKA_BROKERS", "k1:9092,k2:9092")
	t.Setenv("LETHE_KAFKA_PARTITIONS", "12")
	t.Setenv("LETHE_KAFKA_TLS", "true")
	t.Setenv("LETHE_KAFKA_SASL_MECHANISM", "SCRAM-SHA-512")
	t.Setenv("LETHE_KAFKA_SASL_USERNAME", "lethe")
	t.Setenv("LETHE_KAFKA_SASL_PASSWORD", "s3cret-password")
	c, err := broker.FromEnv("x")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Brokers) != 2 || c.Partitions != 12 || c.TLS == nil || c.SASL == nil || c.SASL.Name() != "SCRAM-SHA-512" {
		t.Errorf("config %+v", c)
	}
	if s := c.String(); strings.Contains(s, "s3cret") || !strings.Contains(s, "tls") {
		t.Errorf("String() = %q", s)
	}
	for name, env := range map[string][2]string{
		"bad partitions": {"LETHE_KAFKA_PARTITIONS", "many"},
		"bad mechanism":  {"LETHE_KAFKA_SASL_MECHANISM", "GSSAPI"},
		"no password":    {"LETHE_KAFKA_SASL_PASSWORD", ""},
		"missing CA":     {"LETHE_KAFKA_TLS_CA_FILE", "/nonexistent/ca.pem"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(env[0], env[1])
			if _, err := broker.FromEnv("x"); err == nil {
				t.Errorf("%s=%q accepted", env[0], env[1])
			}
		})
	}
}

// A SASL-protected cluster accepts Lethe's producer with the right credentials only.
func TestSASL(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "lethe", "right-password"), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	produce := func(pass string) error {
		mech, err := broker.Mechanism("SCRAM-SHA-256", "lethe", pass)
		if err != nil {
			t.Fatal(err)
		}
		cl, err := broker.Config{Brokers: c.ListenAddrs(), SASL: mech}.NewProducer(kgo.RecordDeliveryTimeout(2 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		return cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("v")}).FirstErr()
	}
	if err := produce("right-password"); err != nil {
		t.Fatalf("right credentials: %v", err)
	}
	if err := produce("wrong-password"); err == nil {
		t.Fatal("wrong credentials accepted")
	}
}
