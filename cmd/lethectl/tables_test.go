package main

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/lethe-erasure/lethe/pkg/testenv"
)

// TestTablesApply: --dry-run creates nothing; apply creates the audit table (pk, sk) and
// the data-key table (pk), read back with DescribeTable; a second run finds both; a table
// of the same name with another key schema is exit 4; without a table named, usage.
func TestTablesApply(t *testing.T) {
	url := testenv.DynamoDB(t)
	audit, keys := testenv.DynamoTable(t, "tables-audit"), testenv.DynamoTable(t, "tables-keys")
	env := map[string]string{"LETHE_AUDIT_TABLE": audit, "LETHE_KEYS_TABLE": keys, "LETHE_DYNAMODB_ENDPOINT": url}
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	client := dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String(url),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
	schema := func(name string) []string {
		out, err := client.DescribeTable(t.Context(), &dynamodb.DescribeTableInput{TableName: aws.String(name)})
		if err != nil {
			return nil
		}
		var ks []string
		for _, k := range out.Table.KeySchema {
			ks = append(ks, aws.ToString(k.AttributeName)+":"+string(k.KeyType))
		}
		return ks
	}

	r := runCLIEnv(env, "tables", "apply", "--dry-run")
	wantCode(t, r, exitOK)
	if strings.Count(r.stdout, "would be created") != 2 || schema(audit) != nil || schema(keys) != nil {
		t.Fatalf("dry run: %s; tables %v %v", r, schema(audit), schema(keys))
	}
	r = runCLIEnv(env, "tables", "apply")
	wantCode(t, r, exitOK)
	if strings.Count(r.stdout, "created") != 2 {
		t.Errorf("apply: %s", r)
	}
	if got := strings.Join(schema(audit), " "); got != "pk:HASH sk:RANGE" {
		t.Errorf("audit table key schema %q", got)
	}
	if got := strings.Join(schema(keys), " "); got != "pk:HASH" {
		t.Errorf("data-key table key schema %q", got)
	}
	r = runCLIEnv(env, "tables", "apply")
	wantCode(t, r, exitOK)
	if strings.Count(r.stdout, "exists") != 2 {
		t.Errorf("second apply: %s", r)
	}

	// The audit table's name given for the data-key table: a key schema the keys store cannot use.
	r = runCLIEnv(map[string]string{"LETHE_KEYS_TABLE": audit, "LETHE_DYNAMODB_ENDPOINT": url}, "tables", "apply")
	wantCode(t, r, exitProblem)
	if !strings.Contains(r.stdout, "differs: key schema [pk sk]") {
		t.Errorf("another key schema: %s", r)
	}
	wantCode(t, runCLIEnv(map[string]string{}, "tables", "apply"), exitUsage)
}
