package service

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lethe-erasure/lethe/pkg/auth"
	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/discovery"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/metrics"
)

// discoverStore is a fieldStore that also discovers: one uncovered location per run.
type discoverStore struct {
	fieldStore
	runs chan struct{}
}

func (d discoverStore) Discover(_ context.Context, _ *inventory.Inventory, o deletion.DiscoverOptions) ([]deletion.Uncovered, error) {
	select {
	case d.runs <- struct{}{}:
	default:
	}
	return []deletion.Uncovered{{Kind: "rows", Location: "table old_{tenant}", Reason: "identity-like columns " + strings.Join(o.Tenants, ","), Count: 3}}, nil
}

// A deleter whose store discovers runs discovery on its schedule, exports the gauge and
// serves the report on GET /discovery (and a fresh run on POST).
func TestDeleterRunsDiscovery(t *testing.T) {
	cfg := deleterDefaults(t)
	cfg.Deleter.Discovery.Interval, cfg.Deleter.Discovery.Tenants = time.Hour, []string{"acme"}
	store := discoverStore{runs: make(chan struct{}, 1)}
	env := deleterEnv(t, "version: \"1\"\nstores:\n  - {name: chats, kind: rows, locators: {table: chat}}\n")
	env.Metrics = metrics.New()
	spec, err := DeleterSpec("rows-deleter", "rows", func(context.Context, Env, struct{}) (deletion.Store, []metrics.Check, error) {
		return store, nil, nil
	})(context.Background(), env, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if spec.Run == nil {
		t.Fatal("no discovery schedule")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go spec.Run(ctx)
	select {
	case <-store.runs:
	case <-time.After(10 * time.Second):
		t.Fatal("discovery did not run at start")
	}
	srv := httptest.NewServer(env.Metrics.Handler())
	defer srv.Close()
	var got discovery.Response
	for range 100 { // the run's report is recorded just after Discover returns
		resp, err := http.Get(srv.URL + "/discovery")
		if err != nil {
			t.Fatal(err)
		}
		got = discovery.Response{}
		json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if len(got.Reports) == 1 && got.Reports[0].RunAt != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(got.Reports) != 1 || got.Reports[0].RunAt == nil || len(got.Reports[0].Uncovered) != 1 ||
		got.Reports[0].Uncovered[0].Reason != "identity-like columns acme" {
		t.Fatalf("GET /discovery = %+v", got)
	}
	if v := testutil.ToFloat64(env.Metrics.InventoryUncovered.WithLabelValues("rows")); v != 1 {
		t.Errorf("lethe_inventory_uncovered_locations{kind=rows} = %v, want 1", v)
	}
	resp, err := http.Post(srv.URL+"/discovery", "", nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("POST /discovery: %v %v", resp, err)
	}
	resp.Body.Close()
	select {
	case <-store.runs:
	default:
		t.Error("POST /discovery did not run discovery")
	}

	// A store that cannot discover gets no schedule and no endpoint.
	env = deleterEnv(t, "version: \"1\"\nstores:\n  - {name: chats, kind: rows, locators: {table: chat}}\n")
	env.Metrics = metrics.New()
	spec, err = DeleterSpec("rows-deleter", "rows", func(context.Context, Env, struct{}) (deletion.Store, []metrics.Check, error) {
		return fieldStore{}, nil, nil
	})(context.Background(), env, cfg)
	if err != nil || spec.Run != nil {
		t.Errorf("spec without discovery: run %v, %v", spec.Run != nil, err)
	}
}

// POST /discovery scans backends: on a non-loopback listener it needs operator
// credentials, and with credentials configured a tenant's token is refused.
func TestDiscoveryNeedsAnOperator(t *testing.T) {
	post := func(h http.Handler, token string) int {
		req := httptest.NewRequest(http.MethodPost, "/discovery", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	set := discovery.Set{}
	for _, tc := range []struct {
		addr string
		want int
	}{{"127.0.0.1:9090", http.StatusOK}, {"0.0.0.0:9090", http.StatusForbidden}, {":9090", http.StatusForbidden}} {
		h, err := discoveryHandler(set, auth.Settings{}, tc.addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := post(h, ""); got != tc.want {
			t.Errorf("%s without credentials: %d, want %d", tc.addr, got, tc.want)
		}
	}
	ops, opsHash := auth.NewToken()
	app, appHash := auth.NewToken()
	h, err := discoveryHandler(set, auth.Settings{Tokens: "ops:" + opsHash + ":*;app:" + appHash + ":acme"}, "0.0.0.0:9090")
	if err != nil {
		t.Fatal(err)
	}
	for token, want := range map[string]int{"": http.StatusUnauthorized, app: http.StatusForbidden, ops: http.StatusOK} {
		if got := post(h, token); got != want {
			t.Errorf("token %.6s…: %d, want %d", token, got, want)
		}
	}
}
