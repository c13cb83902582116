// Package qdranttest connects behaviour tests to a Qdrant. With LETHE_TEST_QDRANT_ADDR
// set (host:port of a real Qdrant's gRPC API, e.g. localhost:6334) the tests talk to
// that server, so one suite checks the emulator and Qdrant alike; without it each test
// gets a fresh in-process emulator (pkg/qdrantfake). A server that cannot be reached
// fails the test.
package qdranttest

import (
	"context"
	"net"
	"os"
	"strconv"
	"testing"

	"github.com/qdrant/go-client/qdrant"

	"github.com/lethe-erasure/lethe/pkg/qdrantfake"
)

// EnvAddr names the variable holding a real Qdrant's gRPC address.
const EnvAddr = "LETHE_TEST_QDRANT_ADDR"

// Real reports whether the tests run against a real Qdrant.
func Real() bool { return os.Getenv(EnvAddr) != "" }

// Connect returns a client of the Qdrant under test: the server at LETHE_TEST_QDRANT_ADDR
// when set (then srv is nil), else a fresh emulator. The client is closed, and the
// emulator stopped, when t ends.
func Connect(t testing.TB) (c *qdrant.Client, srv *qdrantfake.Server) {
	t.Helper()
	addr := os.Getenv(EnvAddr)
	if addr == "" {
		return Emulator(t)
	}
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("%s=%q: %v", EnvAddr, addr, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("%s=%q: %v", EnvAddr, addr, err)
	}
	c, err = qdrant.NewClient(&qdrant.Config{Host: host, Port: port, SkipCompatibilityCheck: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.HealthCheck(context.Background()); err != nil {
		t.Fatalf("qdrant at %s: %v", addr, err)
	}
	return c, nil
}

// Emulator starts an emulator and returns it with a client, for the tests that use its
// test hooks (faults, deferred visibility, the examined-points counter).
func Emulator(t testing.TB) (*qdrant.Client, *qdrantfake.Server) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	srv, err := qdrantfake.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	c, err := qdrant.NewClient(srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, srv
}

// Collection creates a fresh collection name with 4-dimensional cosine vectors, dropping
// any collection or alias of that name a previous run left behind.
func Collection(t testing.TB, c *qdrant.Client, name string) {
	t.Helper()
	ctx := context.Background()
	_ = c.DeleteAlias(ctx, name)
	if ok, err := c.CollectionExists(ctx, name); err != nil {
		t.Fatal(err)
	} else if ok {
		if err := c.DeleteCollection(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	err := c.CreateCollection(ctx, &qdrant.CreateCollection{
		CollectionName: name,
		VectorsConfig:  qdrant.NewVectorsConfig(&qdrant.VectorParams{Size: 4, Distance: qdrant.Distance_Cosine}),
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Index creates a payload index of type ft on field and waits for it.
func Index(t testing.TB, c *qdrant.Client, coll, field string, ft qdrant.FieldType, params *qdrant.PayloadIndexParams) {
	t.Helper()
	_, err := c.CreateFieldIndex(context.Background(), &qdrant.CreateFieldIndexCollection{
		CollectionName:   coll,
		FieldName:        field,
		FieldType:        ft.Enum(),
		FieldIndexParams: params,
		Wait:             qdrant.PtrOf(true),
	})
	if err != nil {
		t.Fatal(err)
	}
}
