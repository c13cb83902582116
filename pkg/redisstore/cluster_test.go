package redisstore_test

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/redisstore"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

// redisCluster starts a three-primary Redis Cluster of real redis-servers and returns a
// client for it. testenv.Redis starts standalone servers only, so the nodes are started
// here with the same flags plus cluster mode.
func redisCluster(t *testing.T) *redis.ClusterClient {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server not on PATH (install the redis-server package): %v", err)
	}
	ctx := context.Background()
	const nodes = 3
	var addrs []string
	var clients []*redis.Client
	for i := range nodes {
		port := testenv.FreePort(t)
		dir := t.TempDir()
		cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
			"--appendonly", "no", "--dir", dir, "--protected-mode", "no",
			"--cluster-enabled", "yes", "--cluster-config-file", dir+"/nodes.conf")
		if err := cmd.Start(); err != nil {
			t.Fatalf("start redis-server: %v", err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		waitFor(t, "listen on "+addr, func() bool {
			c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
			if err == nil {
				c.Close()
			}
			return err == nil
		})
		c := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { c.Close() })
		lo, hi := i*16384/nodes, (i+1)*16384/nodes-1
		if err := c.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err(); err != nil {
			t.Fatalf("addslotsrange: %v", err)
		}
		if i > 0 {
			if err := clients[0].Do(ctx, "CLUSTER", "MEET", "127.0.0.1", port).Err(); err != nil {
				t.Fatalf("cluster meet: %v", err)
			}
		}
		addrs, clients = append(addrs, addr), append(clients, c)
	}
	waitFor(t, "cluster state ok", func() bool {
		for _, c := range clients {
			info, err := c.ClusterInfo(ctx).Result()
			if err != nil || !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_known_nodes:3") {
				return false
			}
			if slots, err := c.ClusterSlots(ctx).Result(); err != nil || len(slots) != nodes {
				return false
			}
		}
		return true
	})
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { cc.Close() })
	return cc
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

func TestConformanceCluster(t *testing.T) {
	c := redisCluster(t)
	reset := func(t *testing.T) {
		err := c.ForEachMaster(context.Background(), func(ctx context.Context, n *redis.Client) error {
			return n.FlushAll(ctx).Err()
		})
		if err != nil {
			t.Fatalf("flushall: %v", err)
		}
	}
	for _, name := range []string{"redis", "langgraph"} {
		t.Run(name, func(t *testing.T) { deletiontest.Run(t, fixture(c, name, reset)) })
	}
	t.Run("records", func(t *testing.T) { deletiontest.Run(t, recordsFixture(c, reset)) })
	t.Run("ProbeEveryPrimary", func(t *testing.T) {
		reset(t)
		for i := range 30 {
			put(t, c, map[string]any{fmt.Sprintf("crm:acme:%d", i): map[string]string{"email": fmt.Sprintf("u%d@x.de", i%3)}})
		}
		loc := deletion.Uncovered{Kind: redisstore.Kind, Location: "crm:{tenant}:{id}", Fields: []string{"email"}}
		got, err := redisstore.New(c).Probe(context.Background(), inventory.Reference(), []deletion.Uncovered{loc}, deletion.Subject{Tenant: "acme", ID: "u1@x.de"}, deletion.ProbeLimits{})
		if err != nil || len(got) != 1 || got[0].Found != 10 || got[0].Unexamined != "" {
			t.Errorf("Probe over the cluster = %+v, %v; want 10 found", got, err)
		}
	})
	t.Run("KeysSpreadOverEveryPrimary", func(t *testing.T) {
		reset(t)
		s := deletiontest.NewSubject("acme", "spread")
		seed(t, c, s, 30, nil)
		err := c.ForEachMaster(context.Background(), func(ctx context.Context, n *redis.Client) error {
			if size := n.DBSize(ctx).Val(); size == 0 {
				return fmt.Errorf("primary %s holds no key", n.Options().Addr)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}
