package testenv

import (
	"cmp"
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// DynamoTable returns the name a test's table base should have on the DynamoDB of
// DynamoDB: base itself on moto (the test's account is its own) and on dynalite, and base
// with a random suffix on the server of EnvDynamoDB, where the table is deleted (if the
// test created it) when t ends, and waited for until it is gone.
func DynamoTable(t testing.TB, base string) string {
	t.Helper()
	ep := os.Getenv(EnvDynamoDB)
	if ep == "" {
		return base
	}
	name := base + "-" + uniqueSuffix()
	c := dynamodb.New(dynamodb.Options{
		Region: cmp.Or(os.Getenv("AWS_REGION"), os.Getenv("AWS_DEFAULT_REGION"), "us-east-1"),
		Credentials: credentials.NewStaticCredentialsProvider(
			cmp.Or(os.Getenv("AWS_ACCESS_KEY_ID"), "test"), cmp.Or(os.Getenv("AWS_SECRET_ACCESS_KEY"), "test"), ""),
		BaseEndpoint: aws.String(ep),
	})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := c.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)})
		var missing *types.ResourceNotFoundException
		if err != nil && !errors.As(err, &missing) {
			t.Errorf("testenv: delete table %s: %v", name, err)
			return
		}
		// Deletion is asynchronous: wait until the table is gone.
		w := dynamodb.NewTableNotExistsWaiter(c, func(o *dynamodb.TableNotExistsWaiterOptions) { o.MinDelay = 50 * time.Millisecond })
		if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, 30*time.Second); err != nil {
			t.Errorf("testenv: table %s still there: %v", name, err)
		}
	})
	return name
}
