package awsclient_test

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

	"github.com/lethe-erasure/lethe/pkg/awsclient"
	"github.com/lethe-erasure/lethe/pkg/calls"
)

func TestAWSCallsCountedByTable(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	c := dynamodb.New(dynamodb.Options{BaseEndpoint: aws.String(srv.URL), Region: "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("a", "b", ""), APIOptions: []func(*middleware.Stack) error{awsclient.CountCalls}})
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
