package embedded_test

import (
	"bytes"
	"context"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/qdrant/go-client/qdrant"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/embedded"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/qdrantfake"
	"github.com/lethe-erasure/lethe/pkg/qdrantfake/qdranttest"
	"github.com/lethe-erasure/lethe/pkg/service"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

// external returns the real components that LETHE_TEST_KAFKA_BROKERS, LETHE_TEST_S3_ENDPOINT
// and LETHE_TEST_QDRANT_ADDR name, for a system to use instead of its embedded ones:
// Lethe's topics created afresh on the cluster and its bucket on the S3, both deleted when
// t ends. With none set it is the zero External: everything embedded.
func external(t *testing.T) embedded.External {
	t.Helper()
	var x embedded.External
	if testenv.ExternalKafka() {
		x.Kafka = testenv.Kafka(t, embedded.Partitions, service.Topics...).Brokers
	}
	if testenv.ExternalS3() {
		s := testenv.S3(t, embedded.DatasetBucket)
		x.S3, x.S3Endpoint = s.Client, s.URL
	}
	if qdranttest.Real() {
		x.Qdrant, _ = qdranttest.Connect(t)
	}
	return x
}

// The switches to real backends, proven without Docker: Kafka (a cluster of its own:
// Apache Kafka, or kfake on its own port when the tests run on kfake), S3 (moto's server)
// and Qdrant (the emulator) are started apart from Lethe's stack and named in
// LETHE_TEST_KAFKA_BROKERS, LETHE_TEST_S3_ENDPOINT (with AWS credentials) and
// LETHE_TEST_QDRANT_ADDR. An erasure through start's system then reaches a COMPLETE receipt
// with the subject's point and dataset row gone from those servers, its records on that
// cluster's topics, and the bystander's data intact; when the test ends the topics,
// consumer groups and bucket it created there are gone.
func TestRealBackendSwitches(t *testing.T) {
	testenv.SkipOnStandIns(t, "an S3 server apart from the stack")
	ctx := context.Background()
	brokers := ownCluster(t)
	s3url := testenv.Moto(t)
	s3c := testenv.S3Client(s3url)
	qs, err := qdrantfake.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer qs.Close()
	qc, err := qdrant.NewClient(qs.Config())
	if err != nil {
		t.Fatal(err)
	}
	defer qc.Close()
	t.Setenv(testenv.EnvBroker, "kafka")
	t.Setenv(testenv.EnvKafka, strings.Join(brokers, ","))
	t.Setenv(testenv.EnvS3, s3url)
	t.Setenv("AWS_ACCESS_KEY_ID", "lethe")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "lethe-secret")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv(qdranttest.EnvAddr, qs.Addr())

	const tenant, coll = "switch", "shopbot_switch"
	var bucket string
	t.Run("erasure", func(t *testing.T) {
		sys := start(t)
		if err := qc.CreateCollection(ctx, &qdrant.CreateCollection{CollectionName: coll,
			VectorsConfig: qdrant.NewVectorsConfig(&qdrant.VectorParams{Size: 2, Distance: qdrant.Distance_Cosine})}); err != nil {
			t.Fatal(err)
		}
		points := []*qdrant.PointStruct{
			{Id: qdrant.NewIDNum(1), Vectors: qdrant.NewVectorsDense([]float32{1, 0}), Payload: qdrant.NewValueMap(map[string]any{"customer_id": "cust-9"})},
			{Id: qdrant.NewIDNum(2), Vectors: qdrant.NewVectorsDense([]float32{0, 1}), Payload: qdrant.NewValueMap(map[string]any{"customer_id": "cust-99"})},
		}
		if _, err := qc.Upsert(ctx, &qdrant.UpsertPoints{CollectionName: coll, Points: points, Wait: aws.Bool(true)}); err != nil {
			t.Fatal(err)
		}
		csv := "customer_id,session_id,question\ncust-9,s9,where is my order\ncust-99,s99,refund please\n"
		if _, err := sys.Stack.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(embedded.DatasetBucket),
			Key: aws.String(tenant + "/eval.csv"), Body: strings.NewReader(csv)}); err != nil {
			t.Fatal(err)
		}

		acc := submit(t, sys, `{"tenant_id":"switch","subject_id":"cust-9","session_ids":["s9"],"regulation":"GDPR"}`, "switch-1")
		r := waitReceipt(t, sys, acc.RequestID)
		if r.Status != event.ReceiptComplete {
			t.Fatalf("receipt %s, want %s", r.Status, event.ReceiptComplete)
		}
		deleted := map[string]int64{}
		for _, st := range r.Stores {
			deleted[st.Store] = st.Deleted
		}
		if deleted["qdrant"] != 1 || deleted["dataset"] != 1 {
			t.Errorf("receipt's deleted counts %v, want qdrant 1 and dataset 1", deleted)
		}

		// The cluster named carries the request's records.
		// (erasure.completed follows the receipt, so it may take a moment.)
		for _, topic := range []string{event.TopicRequested, event.TopicStoreDone, event.TopicCompleted} {
			deadline := time.Now().Add(10 * time.Second)
			for len(testenv.ReadTopic(t, brokers, topic)) == 0 {
				if time.Now().After(deadline) {
					t.Errorf("%s on the external cluster holds no record", topic)
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		// The S3 named holds the bucket, under a name of this test's own, with only the
		// bystander's row left in the current version.
		lb, err := s3c.ListBuckets(ctx, &s3.ListBucketsInput{})
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range lb.Buckets {
			if strings.HasPrefix(aws.ToString(b.Name), embedded.DatasetBucket+"-") {
				bucket = aws.ToString(b.Name)
			}
		}
		if bucket == "" || len(lb.Buckets) != 1 {
			t.Fatalf("buckets on the external S3: %v, want one named %s-<suffix>", lb.Buckets, embedded.DatasetBucket)
		}
		obj, err := s3c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(tenant + "/eval.csv")})
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(obj.Body)
		obj.Body.Close()
		if bytes.Contains(body, []byte("cust-9,")) || !bytes.Contains(body, []byte("cust-99,s99")) {
			t.Errorf("dataset object on the external S3 after the erasure:\n%s", body)
		}
		// The Qdrant named lost the subject's point and kept the bystander's.
		n, err := qc.Count(ctx, &qdrant.CountPoints{CollectionName: coll, Exact: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		if n != 1 || qs.Calls("Delete") == 0 {
			t.Errorf("external qdrant: %d points left, %d Delete calls; want 1 point and a Delete", n, qs.Calls("Delete"))
		}
		if err := qc.DeleteCollection(ctx, coll); err != nil {
			t.Fatal(err)
		}
	})
	if bucket == "" {
		return
	}

	// What the test created on the external servers is gone.
	adm := kadm.NewClient(mustClient(t, brokers))
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range topics.Names() {
		if slices.Contains(service.Topics, name) {
			t.Errorf("topic %s left on the external cluster", name)
		}
	}
	groups, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) > 0 {
		t.Errorf("consumer groups left on the external cluster: %v", groups.Groups())
	}
	lb, err := s3c.ListBuckets(ctx, &s3.ListBucketsInput{})
	if err != nil {
		t.Fatal(err)
	}
	if len(lb.Buckets) != 0 {
		t.Errorf("%d buckets left on the external S3, %s among them", len(lb.Buckets), aws.ToString(lb.Buckets[0].Name))
	}
}

// ownCluster starts a Kafka cluster for t alone: Apache Kafka, or kfake when the tests run
// on kfake.
func ownCluster(t *testing.T) []string {
	t.Helper()
	if testenv.ExternalKafka() {
		return testenv.KafkaProcesses(t, testenv.KafkaOptions{}).Brokers()
	}
	kc, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	return kc.ListenAddrs()
}

func mustClient(t *testing.T, brokers []string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}
