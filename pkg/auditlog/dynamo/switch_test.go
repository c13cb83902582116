package dynamo

import (
	"context"
	"regexp"
	"slices"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/auditlog/auditlogtest"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

// The switch to a real DynamoDB, proven without Docker: a dynalite started apart from the
// tests is named in LETHE_TEST_DYNAMODB_ENDPOINT. The audit-store suite then runs on that
// server, each store on a table with a name of its own there, and when it ends those
// tables are gone.
var unique = regexp.MustCompile(`^audit-[0-9]+-[0-9a-f]{12}$`)

func TestRealDynamoDBSwitch(t *testing.T) {
	t.Setenv(testenv.EnvDynamoDB, "")
	url := testenv.DynamoDB(t)
	t.Setenv(testenv.EnvDynamoDB, url)
	direct := newEnv(t).client
	ctx := context.Background()

	var (
		mu   sync.Mutex // the suite's tests run in parallel
		seen []string
	)
	t.Run("suite", func(t *testing.T) {
		if got := testenv.DynamoDB(t); got != url {
			t.Fatalf("Dynalite = %s, want the endpoint named, %s", got, url)
		}
		e := newEnv(t)
		auditlogtest.Run(t, func(t *testing.T) auditlog.Store {
			s := e.store(t)
			if !unique.MatchString(s.table) {
				t.Errorf("table %s: want audit-<n>-<12 hex digits>", s.table)
			}
			if _, err := direct.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(s.table)}); err != nil {
				t.Errorf("table %s is not on the server named: %v", s.table, err)
			}
			mu.Lock()
			seen = append(seen, s.table)
			mu.Unlock()
			return s
		})
	})
	if len(seen) == 0 {
		t.Fatal("the suite made no store")
	}
	var left []string
	p := dynamodb.NewListTablesPaginator(direct, &dynamodb.ListTablesInput{})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		left = append(left, page.TableNames...)
	}
	for _, name := range seen {
		if slices.Contains(left, name) {
			t.Errorf("table %s left on the server after the test", name)
		}
	}
}
