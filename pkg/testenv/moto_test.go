package testenv_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lethe-erasure/lethe/pkg/testenv"
)

func dynamoClient(endpoint string) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
}

func createTable(t *testing.T, c *dynamodb.Client, name string) {
	t.Helper()
	_, err := c.CreateTable(context.Background(), &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Each test has an account of its own on the one moto server: two tests create a table
// of the same name without colliding, and see only their own; when a test ends its
// tables are gone.
func TestMotoAccounts(t *testing.T) {
	if testenv.StandIns() || testenv.ExternalDynamoDB() {
		t.Skip("moto's accounts only")
	}
	var eps []string
	for i := range 2 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			ep := testenv.DynamoDB(t)
			eps = append(eps, ep)
			c := dynamoClient(ep)
			createTable(t, c, "same-name")
			out, err := c.ListTables(context.Background(), &dynamodb.ListTablesInput{})
			if err != nil || len(out.TableNames) != 1 {
				t.Fatalf("tables %v, %v; want only this test's", out.TableNames, err)
			}
		})
	}
	if eps[0] == eps[1] {
		t.Fatalf("both tests reached moto at %s", eps[0])
	}
	// The default account, as a client without the proxy sees it, holds nothing.
	out, err := dynamoClient(testenv.Moto(t)).ListTables(context.Background(), &dynamodb.ListTablesInput{})
	if err != nil || len(out.TableNames) != 0 {
		t.Errorf("tables of the default account %v, %v; want none", out.TableNames, err)
	}
}

// The server dies with the test binary that started it: a child test binary starts moto,
// prints its pid and exits without any cleanup of its own.
func TestMotoDiesWithBinary(t *testing.T) {
	if os.Getenv("LETHE_TEST_MOTO_CHILD") == "1" {
		testenv.Moto(t)
		fmt.Printf("moto-pid=%d\n", motoPID(t))
		os.Exit(0)
	}
	testenv.SkipOnStandIns(t, "moto's server")
	cmd := exec.Command(os.Args[0], "-test.run=^TestMotoDiesWithBinary$")
	cmd.Env = append(os.Environ(), "LETHE_TEST_MOTO_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	_, after, ok := strings.Cut(string(out), "moto-pid=")
	pid, _ := strconv.Atoi(strings.TrimSpace(strings.SplitN(after, "\n", 2)[0]))
	if !ok || pid == 0 {
		t.Fatalf("child printed no pid:\n%s", out)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if syscall.Kill(pid, 0) != nil {
			return // gone
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("moto (pid %d) outlived the test binary", pid)
		}
	}
}

// motoPID is the pid of this binary's moto server: its child listening on moto's port.
func motoPID(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	self := strconv.Itoa(os.Getpid())
	for _, e := range entries {
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		_, rest, _ := strings.Cut(string(stat), ") ")
		if f := strings.Fields(rest); len(f) > 1 && f[1] == self {
			cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
			if strings.Contains(string(cmdline), "moto_server") {
				pid, _ := strconv.Atoi(e.Name())
				return pid
			}
		}
	}
	t.Fatal("no moto_server child")
	return 0
}
