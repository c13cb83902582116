package calls_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/calls"
)

func TestAWSCallsCountedByTable(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	c := dynamodb.New(dynamodb.Options{BaseEndpoint: aws.String(srv.URL), Region: "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("a", "b", ""), APIOptions: []func(*middleware.Stack) error{calls.AWS}})
	get := calls.Total.WithLabelValues(calls.DynamoDB, "audit-t", "GetItem")
	batch := calls.Total.WithLabelValues(calls.DynamoDB, "audit-t", "BatchWriteItem")
	g0, b0 := testutil.ToFloat64(get), testutil.ToFloat64(batch)
	ctx := context.Background()
	for range 2 {
		if _, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("audit-t"), Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "x"}}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{"audit-t": {{PutRequest: &types.PutRequest{
		Item: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "x"}}}}}}}); err != nil {
		t.Fatal(err)
	}
	if d := testutil.ToFloat64(get) - g0; d != 2 {
		t.Errorf("GetItem on audit-t counted %v times, want 2", d)
	}
	if d := testutil.ToFloat64(batch) - b0; d != 1 {
		t.Errorf("BatchWriteItem on audit-t counted %v times, want 1", d)
	}
}

func TestRedisPipelineIsOneCall(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	defer c.Close()
	c.AddHook(calls.RedisHook{})
	get := calls.Total.WithLabelValues(calls.Redis, "", "get")
	pipe := calls.Total.WithLabelValues(calls.Redis, "", "pipeline")
	g0, p0 := testutil.ToFloat64(get), testutil.ToFloat64(pipe)
	ctx := context.Background()
	c.Get(ctx, "k")
	c.Pipelined(ctx, func(p redis.Pipeliner) error { p.Get(ctx, "a"); p.Get(ctx, "b"); return nil })
	if d := testutil.ToFloat64(get) - g0; d != 1 {
		t.Errorf("get counted %v times, want 1 (the pipeline's gets are not commands of their own)", d)
	}
	if d := testutil.ToFloat64(pipe) - p0; d != 1 {
		t.Errorf("pipeline counted %v times, want 1", d)
	}
}

func TestKafkaRequestsCountedByType(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.WithHooks(calls.KafkaHook{}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	produce := calls.Total.WithLabelValues(calls.Kafka, "", "Produce")
	p0 := testutil.ToFloat64(produce)
	for i := range 3 {
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "t", Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if d := testutil.ToFloat64(produce) - p0; d != 3 {
		t.Errorf("Produce counted %v times, want 3 (one synchronous produce each)", d)
	}
}
