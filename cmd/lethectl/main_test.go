package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/lethe-erasure/lethe/pkg/datasetstore"
	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/embedded"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/redisstore"
	"github.com/lethe-erasure/lethe/pkg/subject"
)

// sys is the embedded Lethe every test drives. Its inventory is the reference inventory
// plus "archive", a dataset store in the bucket archive-<tenant>: a tenant whose bucket
// was not created (see tenant) gets a FAILED archive store, which is how the tests make
// an erasure fail honestly.
var sys *embedded.System

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "lethectl-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	inv := inventory.Reference()
	inv.Stores = append(inv.Stores, inventory.Entry{Name: "archive", Kind: datasetstore.Kind,
		Locators: inventory.Locators{"prefixes": []string{"s3://archive-{tenant}/"}, "subject_columns": []string{"customer_id"}}})
	if err := inv.Validate(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sys, err = embedded.Start(ctx, embedded.Options{Key: testKey(), DataDir: dir, Inventory: inv})
	if err != nil {
		fmt.Fprintln(os.Stderr, "embedded lethe:", err)
		return 1
	}
	defer sys.Stop()
	return m.Run()
}

func testKey() subject.Key {
	k, err := subject.NewKey("k-test", bytes.Repeat([]byte("lethectl-test-key"), 2))
	if err != nil {
		panic(err)
	}
	return k
}

// result is one lethectl run.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// invocation configures a lethectl run.
type invocation struct {
	env   map[string]string
	stdin string
	tty   bool
	sys   *embedded.System // default sys
}

// lethectl runs the command against sys, with the audit store and brokers injected.
func lethectl(t *testing.T, args ...string) result {
	t.Helper()
	return invocation{}.run(t, args...)
}

func (in invocation) run(t *testing.T, args ...string) result {
	t.Helper()
	target := in.sys
	if target == nil {
		target = sys
	}
	// The stack frames its topics for its registry: lethectl reads them with the same
	// setting as the services, as an operator gives it.
	env := map[string]string{"LETHE_SERVER": target.BaseURL, "LETHE_SCHEMA_REGISTRY_URL": "http://" + target.Stack.Addrs.Registry}
	for k, v := range in.env {
		env[k] = v
	}
	var stdout, stderr bytes.Buffer
	brokers := target.Stack.Broker
	c := &cli{getenv: func(k string) string { return env[k] }, stdin: strings.NewReader(in.stdin), isTTY: func() bool { return in.tty },
		stdout: &stdout, stderr: &stderr, audit: target.Stack.Audit, brokers: &brokers, mac: target.MAC, chainKey: target.ChainKey}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code := c.run(ctx, args)
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// wantCode fails the test unless r exited with code.
func wantCode(t *testing.T, r result, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("want exit %d, got %s", code, r)
	}
}

// decode parses r's stdout as JSON into v.
func decode(t *testing.T, r result, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, r)
	}
}

// tenantSeq makes tenant names unique across repeated runs (-count) on the shared system.
var tenantSeq atomic.Int64

// uniqueTenant returns name with a suffix no other test run uses.
func uniqueTenant(name string) string {
	return fmt.Sprintf("%s-%d", name, tenantSeq.Add(1))
}

// tenant returns a tenant name unique to the run whose archive bucket exists, so its
// erasures can complete.
func tenant(t *testing.T, name string) string {
	t.Helper()
	name = uniqueTenant(name)
	createArchive(t, name)
	return name
}

// createArchive creates the archive bucket of tenant.
func createArchive(t *testing.T, tenant string) {
	t.Helper()
	if _, err := sys.Stack.S3.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String("archive-" + tenant)}); err != nil {
		t.Fatal(err)
	}
}

// seedRedis writes one key per Redis key template of the inventory for the subject and
// lists them in its index, as the RAG app does; it returns how many keys it wrote.
func seedRedis(t *testing.T, tenant, subjectID, session string) int {
	t.Helper()
	ctx := context.Background()
	s := deletion.Subject{Tenant: tenant, ID: subjectID, Hash: sys.Key.Pseudonym(tenant, subjectID), Sessions: []string{session}, Scope: event.ScopeSubject}
	n := 0
	for _, st := range sys.Inventory.OfKinds(redisstore.Kind) {
		var keys []string
		l, err := redisstore.LocatorsOf(st)
		if err != nil {
			t.Fatal(err)
		}
		for _, tmpl := range l.Keys {
			k := redisstore.Key(tmpl, s.Vars(session), redisstore.KeyPart(session)+":0")
			if err := sys.Stack.Redis.Set(ctx, k, "turn", 0).Err(); err != nil {
				t.Fatal(err)
			}
			keys = append(keys, k)
			n++
		}
		if err := redisstore.Index(ctx, sys.Stack.Redis, st, s, keys...); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// noRawIDs fails the test if r's output holds any of ids.
func noRawIDs(t *testing.T, r result, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if strings.Contains(r.stdout, id) || strings.Contains(r.stderr, id) {
			t.Errorf("output holds the raw identifier %q:\n%s", id, r)
		}
	}
}

// eventually polls cond until it holds or 10 s pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
