package testenv_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/testenv"
)

// With LETHE_TEST_KAFKA_BROKERS naming a cluster started apart (Apache Kafka, or kfake on
// its own port when the tests run on kfake), Kafka replaces a topic a crashed run left
// (its records gone), creates the others with the partitions asked, lets the same test
// call it again, and when the test ends deletes the topics and the consumer groups that
// appeared, keeping what was there before.
func TestKafkaSwitch(t *testing.T) {
	ctx := context.Background()
	var brokers []string
	if testenv.ExternalKafka() {
		brokers = testenv.KafkaProcesses(t, testenv.KafkaOptions{}).Brokers()
	} else {
		kc, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			t.Fatal(err)
		}
		defer kc.Close()
		brokers = kc.ListenAddrs()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.MetadataMinAge(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopics(ctx, 1, -1, nil, "leftover", "unrelated"); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "leftover", Value: []byte("old")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	t.Setenv(testenv.EnvBroker, "kafka")
	t.Setenv(testenv.EnvKafka, strings.Join(brokers, ","))

	t.Run("test", func(t *testing.T) {
		b := testenv.Kafka(t, 3, "leftover", "fresh")
		if strings.Join(b.Brokers, ",") != strings.Join(brokers, ",") {
			t.Fatalf("brokers %v, want the cluster named, %v", b.Brokers, brokers)
		}
		testenv.Kafka(t, 2, "again") // a second call in the same test does not wait for itself
		td, err := adm.ListTopics(ctx, "leftover", "fresh", "again")
		if err != nil {
			t.Fatal(err)
		}
		for name, want := range map[string]int{"leftover": 3, "fresh": 3, "again": 2} {
			if d := td[name]; d.Err != nil || len(d.Partitions) != want {
				t.Errorf("topic %s: %d partitions (%v), want %d", name, len(d.Partitions), d.Err, want)
			}
		}
		if n := len(testenv.ReadTopic(t, brokers, "leftover")); n != 0 {
			t.Errorf("the leftover topic kept %d records", n)
		}
		g, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumerGroup("switch-group"), kgo.ConsumeTopics("fresh"))
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "fresh", Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		recs := g.PollRecords(pctx, 1).Records()
		cancel()
		if len(recs) != 1 {
			t.Fatalf("the group read %d records", len(recs))
		}
		if err := g.CommitUncommittedOffsets(ctx); err != nil {
			t.Fatal(err)
		}
		g.Close()
	})

	td, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if names := strings.Join(td.Names(), ","); names != "unrelated" {
		t.Errorf("topics after the test: %s, want only unrelated", names)
	}
	groups, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != 0 {
		t.Errorf("groups after the test: %v", groups.Groups())
	}
}

// With LETHE_TEST_S3_ENDPOINT naming an S3 started apart (moto's server), S3With
// creates each bucket under a name of the test's own there, while the test keeps using the
// names it chose (in requests and in responses); Wrap stands in front, Unversioned is
// kept, Stop makes S3 unreachable; when the test ends every version, delete marker and
// bucket it created is gone.
func TestS3Switch(t *testing.T) {
	ctx := context.Background()
	testenv.SkipOnStandIns(t, "an S3 server apart")
	url := testenv.Moto(t)
	direct := testenv.S3Client(url)
	t.Setenv(testenv.EnvS3, url)
	t.Setenv("AWS_ACCESS_KEY_ID", "lethe")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "lethe-secret")

	t.Run("test", func(t *testing.T) {
		var wrapped atomic.Int64
		s := testenv.S3With(t, testenv.S3Options{Wrap: func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				wrapped.Add(1)
				h.ServeHTTP(w, r)
			})
		}}, "data")
		flat := testenv.S3With(t, testenv.S3Options{Unversioned: true}, "flat")
		for i, body := range []string{"v1", "v2"} {
			if _, err := s.Client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("data"), Key: aws.String("a/b c.txt"),
				Body: strings.NewReader(body)}); err != nil {
				t.Fatalf("put %d: %v", i, err)
			}
		}
		if _, err := s.Client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("data"), Key: aws.String("a/b c.txt")}); err != nil {
			t.Fatal(err)
		}
		vs, err := s.Client.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String("data")})
		if err != nil {
			t.Fatal(err)
		}
		if aws.ToString(vs.Name) != "data" || len(vs.Versions) != 2 || len(vs.DeleteMarkers) != 1 {
			t.Errorf("versions listed as bucket %q: %d versions, %d delete markers; want data, 2, 1", aws.ToString(vs.Name), len(vs.Versions), len(vs.DeleteMarkers))
		}
		if wrapped.Load() == 0 {
			t.Error("Wrap saw no request")
		}
		lb, err := direct.ListBuckets(ctx, &s3.ListBucketsInput{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, b := range lb.Buckets {
			names = append(names, aws.ToString(b.Name))
		}
		slices.Sort(names)
		if len(names) != 2 || !strings.HasPrefix(names[0], "data-") || !strings.HasPrefix(names[1], "flat-") {
			t.Fatalf("buckets on the server named: %v, want data-<suffix> and flat-<suffix>", names)
		}
		got, err := direct.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(names[0]), Key: aws.String("a/b c.txt"), VersionId: vs.Versions[0].VersionId})
		if err != nil {
			t.Fatalf("the version is not on the server named: %v", err)
		}
		got.Body.Close()
		v, err := direct.GetBucketVersioning(ctx, &s3.GetBucketVersioningInput{Bucket: aws.String(names[1])}) // flat-…
		if err != nil || v.Status != "" {
			t.Errorf("versioning of the unversioned bucket: %q, %v", v.Status, err)
		}
		flat.Stop()
		if _, err := flat.Client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("flat")}); err == nil {
			t.Error("S3 answered after Stop")
		}
	})

	lb, err := direct.ListBuckets(ctx, &s3.ListBucketsInput{})
	if err != nil {
		t.Fatal(err)
	}
	if len(lb.Buckets) != 0 {
		t.Errorf("%d buckets left after the test", len(lb.Buckets))
	}
}
