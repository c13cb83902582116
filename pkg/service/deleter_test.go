package service

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/lethe-erasure/lethe/pkg/config"
	"github.com/lethe-erasure/lethe/pkg/consumer"
	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/envconf"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/integrity"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/metrics"
	"github.com/lethe-erasure/lethe/pkg/retry"
	"github.com/lethe-erasure/lethe/pkg/testenv"
	"github.com/lethe-erasure/lethe/pkg/worker"
)

// fieldStore validates that every store of its kind has a "table" locator.
type fieldStore struct{}

func (fieldStore) Erase(context.Context, inventory.Entry, deletion.Subject) (deletion.Result, error) {
	return deletion.Result{}, nil
}

func (fieldStore) Verify(context.Context, inventory.Entry, deletion.Subject) (event.Verification, error) {
	return event.Verification{}, nil
}

func (fieldStore) Validate(st inventory.Entry) error {
	var l struct {
		Table string `yaml:"table"`
	}
	if err := st.Locators.Decode(&l); err != nil {
		return err
	}
	if l.Table == "" {
		return errors.New("locators.table is empty")
	}
	return nil
}

func deleterEnv(t *testing.T, doc string) Env {
	t.Helper()
	inv, err := inventory.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return Env{Config: &config.Config{Inventory: inv, MetricsAddr: "127.0.0.1:9090"}, Log: zap.NewNop()}
}

func TestDeleterSpec(t *testing.T) {
	open := func(context.Context, Env, struct{}) (deletion.Store, []metrics.Check, error) {
		return fieldStore{}, []metrics.Check{{Name: "rows"}}, nil
	}
	env := deleterEnv(t, `
version: "1"
stores:
  - {name: chats, kind: rows, locators: {table: chat}}
  - {name: vectors, kind: qdrant, locators: {anything: [goes]}}
`)
	spec, err := DeleterSpec("rows-deleter", "rows", open)(context.Background(), env, deleterDefaults(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(spec.Groups) != 1 || spec.Groups[0].Name != "lethe-rows-deleter" || spec.Groups[0].Handler == nil ||
		fmt.Sprint(spec.Groups[0].Topics) != fmt.Sprint([]string{event.TopicRequested}) {
		t.Errorf("groups = %+v", spec.Groups)
	}
	if len(spec.Checks) != 1 || spec.Checks[0].Name != "rows" {
		t.Errorf("checks = %+v", spec.Checks)
	}

	// An invalid store of the kind refuses the start, naming the store and the field;
	// stores of other kinds are not the deleter's to judge.
	env = deleterEnv(t, `
version: "1"
stores:
  - {name: chats, kind: rows, locators: {table: chat}}
  - {name: tickets, kind: rows, locators: {tabel: t}}
  - {name: audit, kind: rows}
  - {name: vectors, kind: qdrant, locators: {anything: [goes]}}
`)
	_, err = DeleterSpec("rows-deleter", "rows", open)(context.Background(), env, deleterDefaults(t))
	for _, want := range []string{"refusing to start", `inventory store "tickets" of kind "rows"`, `unknown field "tabel"`, `"audit"`, "locators.table is empty"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("invalid store: %v, want it to name %q", err, want)
		}
	}
	if err != nil && strings.Contains(err.Error(), "vectors") {
		t.Errorf("error judges a store of another kind: %v", err)
	}

	// A failing open is returned; an inventory without the kind is no error.
	_, err = DeleterSpec("rows-deleter", "rows", func(context.Context, Env, struct{}) (deletion.Store, []metrics.Check, error) {
		return nil, nil, errors.New("no dsn")
	})(context.Background(), env, deleterDefaults(t))
	if err == nil || !strings.Contains(err.Error(), "no dsn") {
		t.Errorf("failing open: %v", err)
	}
	if _, err := DeleterSpec("x-deleter", "x", open)(context.Background(), env, deleterDefaults(t)); err != nil {
		t.Errorf("inventory without the kind: %v", err)
	}
}

// deleterDefaults are a deleter's settings in an empty environment.
func deleterDefaults(t *testing.T) DeleterSettings[struct{}] {
	t.Helper()
	var cfg DeleterSettings[struct{}]
	if err := envconf.Defaults(&cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestDeleterConfig(t *testing.T) {
	for _, tc := range []struct {
		max, wait, inflight, running string
		want                         worker.Batching
		wantInFlight                 int
		bad                          bool
	}{
		{"", "", "", "", worker.DefaultBatching, worker.DefaultInFlight, false},
		{"1", "", "", "", worker.Batching{Max: 1, Wait: worker.DefaultBatching.Wait, Running: 1}, worker.DefaultInFlight, false},
		{"128", "5ms", "64", "2", worker.Batching{Max: 128, Wait: 5 * time.Millisecond, Running: 2}, 64, false},
		{"", "", "1", "", worker.DefaultBatching, 1, false},
		{"0", "", "", "", worker.Batching{}, 0, true},
		{"many", "", "", "", worker.Batching{}, 0, true},
		{"", "2s", "", "", worker.Batching{}, 0, true},
		{"", "soon", "", "", worker.Batching{}, 0, true},
		{"", "", "0", "", worker.Batching{}, 0, true},
		{"", "", "5000", "", worker.Batching{}, 0, true},
		{"", "", "", "0", worker.Batching{}, 0, true},
		{"", "", "", "65", worker.Batching{}, 0, true},
	} {
		env := map[string]string{"LETHE_BATCH_MAX": tc.max, "LETHE_BATCH_WAIT": tc.wait, "LETHE_INFLIGHT": tc.inflight, "LETHE_BATCH_RUNNING": tc.running}
		var cfg DeleterConfig
		err := envconf.Load(&cfg, func(k string) string { return env[k] })
		got, inflight := cfg.Batch.Batching(), cfg.InFlight.PerPartition
		if (err != nil) != tc.bad || !tc.bad && (got != tc.want || inflight != tc.wantInFlight) {
			t.Errorf("max %q wait %q inflight %q running %q: %+v %d, %v", tc.max, tc.wait, tc.inflight, tc.running, got, inflight, err)
		}
	}
}

func TestConsumers(t *testing.T) {
	for v, want := range map[string]int{"": consumer.DefaultMaxInFlight, "1": 1, "96": 96, "65536": 65536, "0": -1, "-5": -1, "65537": -1, "lots": -1} {
		var c Consumers
		err := envconf.Load(&c, func(k string) string {
			if k == "LETHE_INFLIGHT_MAX" {
				return v
			}
			return ""
		})
		if want < 0 && err == nil || want >= 0 && (err != nil || c.MaxInFlight != want) {
			t.Errorf("LETHE_INFLIGHT_MAX %q: %d, %v; want %d", v, c.MaxInFlight, err, want)
		}
	}
}

// The deleter's worker checks every request's MAC with the configured key: an unsigned
// request, which anyone able to produce to erasure.requested could write, is refused
// before any store is touched.
func TestDeleterSpecAuthenticatesRequests(t *testing.T) {
	env := deleterEnv(t, `
version: "1"
stores:
  - {name: chats, kind: rows, locators: {table: chat}}
`)
	mac, err := integrity.NewRing("mac1", map[string][]byte{"mac1": []byte("record-mac-key-0123456789abcdefghijkl")})
	if err != nil {
		t.Fatal(err)
	}
	env.Config.MAC, env.Sealer = mac, testenv.Sealer(t)
	spec, err := DeleterSpec("rows-deleter", "rows", func(context.Context, Env, struct{}) (deletion.Store, []metrics.Check, error) {
		return fieldStore{}, nil, nil
	})(context.Background(), env, deleterDefaults(t))
	if err != nil {
		t.Fatal(err)
	}
	b, err := event.Request.Encode(&event.Requested{RequestID: "er_1", TenantID: "acme", Scope: event.ScopeTenant, ExpectedStores: []string{"chats"}})
	if err != nil {
		t.Fatal(err)
	}
	err = spec.Groups[0].Handler(context.Background(), &kgo.Record{Topic: event.TopicRequested, Value: b})
	if !retry.IsPermanent(err) || !errors.Is(err, integrity.ErrUnsigned) {
		t.Errorf("unsigned request: %v, want a permanent refusal", err)
	}
}
