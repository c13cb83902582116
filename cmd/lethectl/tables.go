package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lethe-erasure/lethe/pkg/auditlog/dynamo"
	"github.com/lethe-erasure/lethe/pkg/envelope/dynamokeys"
)

var tablesApplyCmd = &command{
	name:    "tables apply",
	args:    "[--dry-run] [--timeout D]",
	summary: "create the DynamoDB audit and data-key tables if they do not exist, and check the key schema of those that do",
	help: `Provisions the DynamoDB tables the services share, as topics apply does the topics: the
audit table LETHE_AUDIT_TABLE (requests, reports, receipts, addenda and the intake's
workflow; string keys pk and sk) and the data-key table LETHE_KEYS_TABLE (string key pk),
both on-demand. A missing table is created and waited for; an existing one is left as it
is, and reported as a problem when its key schema is not the one the services need.
--dry-run only says what it would create. The endpoint is LETHE_DYNAMODB_ENDPOINT (empty:
AWS), credentials and region come from the AWS default chain.

Run it once per environment before the services (the Kubernetes Job lethe-tables does):
then no service needs dynamodb:CreateTable (leave LETHE_AUDIT_CREATE_TABLE unset). Its own
identity needs dynamodb:DescribeTable and dynamodb:CreateTable on the two tables.`,
	example: `LETHE_AUDIT_TABLE=lethe-audit LETHE_KEYS_TABLE=lethe-keys lethectl tables apply
LETHE_AUDIT_TABLE=lethe-audit LETHE_KEYS_TABLE=lethe-keys lethectl tables apply --dry-run`,
	exits: "0 every table exists with its key schema (or, --dry-run, was planned); 1 error; 2 usage (no table named); 4 a table exists with another key schema; 5 --timeout passed.",
	setup: func(c *cli, fs *flag.FlagSet) func(context.Context, []string) error {
		var dryRun bool
		var timeout time.Duration
		fs.BoolVar(&dryRun, "dry-run", false, "say which tables would be created; create nothing")
		fs.DurationVar(&timeout, "timeout", 5*time.Minute, "give up (exit 5) after this long")
		return func(ctx context.Context, args []string) error {
			if len(args) > 0 {
				return usageErrorf("no arguments expected, got %q", args)
			}
			tables := []dynamoTable{
				{role: "audit", name: c.env(c.g.auditTable, "LETHE_AUDIT_TABLE", ""), keys: []string{"pk", "sk"}},
				{role: "data-key", name: c.getenv("LETHE_KEYS_TABLE"), keys: []string{"pk"}},
			}
			tables = slices.DeleteFunc(tables, func(t dynamoTable) bool { return t.name == "" })
			if len(tables) == 0 {
				return usageErrorf("no table named: set LETHE_AUDIT_TABLE or LETHE_KEYS_TABLE")
			}
			ac, err := awsconfig.LoadDefaultConfig(ctx)
			if err != nil {
				return fmt.Errorf("aws configuration: %w", err)
			}
			endpoint := c.getenv("LETHE_DYNAMODB_ENDPOINT")
			client := dynamodb.NewFromConfig(ac, func(o *dynamodb.Options) {
				if endpoint != "" {
					o.BaseEndpoint = aws.String(endpoint)
				}
			})
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			var problems []string
			for _, t := range tables {
				state, err := t.apply(ctx, client, dryRun)
				if ctx.Err() != nil {
					return withCode(exitTimeout, fmt.Errorf("%s table %s: gave up after %s: %w", t.role, t.name, timeout, err))
				}
				if err != nil {
					return fmt.Errorf("%s table %s: %w", t.role, t.name, err)
				}
				if strings.HasPrefix(state, "differs") {
					problems = append(problems, t.name)
				}
				fmt.Fprintf(c.stdout, "%-9s %-30s %s\n", t.role, t.name, state)
			}
			if len(problems) > 0 {
				return withCode(exitProblem, fmt.Errorf("tables with another key schema than the services need: %s", strings.Join(problems, ", ")))
			}
			return nil
		}
	},
}

// dynamoTable is one table tables apply provisions: its role, name and key attributes (hash
// key first, then the range key).
type dynamoTable struct {
	role, name string
	keys       []string
}

// apply creates the table unless it exists, and returns what it found or did.
func (t dynamoTable) apply(ctx context.Context, client *dynamodb.Client, dryRun bool) (string, error) {
	out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(t.name)})
	var missing *types.ResourceNotFoundException
	switch {
	case errors.As(err, &missing):
		if dryRun {
			return "would be created", nil
		}
		create := dynamo.New(client, t.name).CreateTable
		if t.role == "data-key" {
			create = dynamokeys.New(client, t.name).CreateTable
		}
		if err := create(ctx); err != nil {
			return "", err
		}
		return "created", nil
	case err != nil:
		return "", err
	}
	var got []string
	for _, k := range out.Table.KeySchema { // DynamoDB lists the hash key first
		got = append(got, aws.ToString(k.AttributeName))
	}
	if !slices.Equal(got, t.keys) {
		return fmt.Sprintf("differs: key schema %v, the services need %v", got, t.keys), nil
	}
	return "exists", nil
}
