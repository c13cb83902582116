package chaos

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/broker"
	"github.com/lethe-erasure/lethe/pkg/event"
)

// TestBrokerSurvivesKill checks what the kafka dev broker keeps across a SIGKILL: the
// topics, every acknowledged record and the committed group offsets.
func TestBrokerSurvivesKill(t *testing.T) {
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bin, err := Build(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	k := &Proc{Name: "kafka", Path: filepath.Join(bin, "kafka"), Args: []string{"-port", strconv.Itoa(port), "-dir", filepath.Join(dir, "data")}, Port: port, Dir: dir}
	if err := k.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer k.Kill()
	b := broker.Config{Brokers: []string{fmt.Sprintf("127.0.0.1:%d", port)}}
	cl, err := b.NewProducer()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: event.TopicRequested, Key: []byte("k"), Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, event.TopicRequested)
	if err != nil {
		t.Fatal(err)
	}
	offsets := kadm.Offsets{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			offsets.Add(kadm.Offset{Topic: o.Topic, Partition: o.Partition, At: o.Offset - 3, LeaderEpoch: -1})
		}
	})
	if _, err := adm.CommitOffsets(ctx, "probe", offsets); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	if err := k.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := k.Start(ctx); err != nil {
		t.Fatalf("restart on the same data dir: %v", err)
	}
	cl, err = b.NewProducer()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm = kadm.NewClient(cl)
	after, err := adm.ListEndOffsets(ctx, event.TopicRequested)
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		if got, _ := after.Lookup(o.Topic, o.Partition); got.Offset != o.Offset {
			t.Errorf("partition %d: end offset %d after the kill, %d before", o.Partition, got.Offset, o.Offset)
		}
	})
	committed, err := adm.FetchOffsets(ctx, "probe")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range offsets.Sorted() {
		if got, ok := committed.Lookup(o.Topic, o.Partition); !ok || got.At != o.At {
			t.Errorf("partition %d: committed offset %+v after the kill, want %d", o.Partition, got, o.At)
		}
	}
}
