package service

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/envconf"
	"github.com/lethe-erasure/lethe/pkg/metrics"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

func setEnv(t *testing.T, brokers string) string {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	t.Setenv("LETHE_KAFKA_BROKERS", brokers)
	t.Setenv("LETHE_HMAC_KEY", strings.Repeat("h", 32))
	t.Setenv("LETHE_KEK", base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789ABCDEF")))
	t.Setenv("LETHE_MAC_KEY", "record-mac-key-0123456789abcdefghijkl")
	t.Setenv("LETHE_KEYS_DIR", t.TempDir())
	t.Setenv("LETHE_METRICS_ADDR", addr)
	t.Setenv("LETHE_LOG_LEVEL", "error")
	return addr
}

// runEnv runs the service "test" built by build, configured by the environment.
func runEnv(ctx context.Context, build func(context.Context, Env) (Spec, error)) error {
	var cfg Config[struct{}]
	if err := envconf.FromEnv(&cfg); err != nil {
		return err
	}
	return run(ctx, "test", cfg, func(ctx context.Context, env Env, _ struct{}) (Spec, error) { return build(ctx, env) })
}

// A service serves metrics and health, creates its topics, runs its groups and stops on
// cancel.
func TestRunServesHealthAndRunsGroups(t *testing.T) {
	b := testenv.KafkaEmpty(t, 1, Topics...)
	addr := setEnv(t, strings.Join(b.Brokers, ","))
	got := make(chan string, 1)
	var storeUp atomic.Bool
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runEnv(ctx, func(ctx context.Context, env Env) (Spec, error) {
			if env.Sealer == nil || env.Metrics == nil || env.Producer == nil {
				t.Error("incomplete Env")
			}
			return Spec{
				Groups: []Group{{Name: "g", Topics: []string{"erasure.intake"}, Handler: func(_ context.Context, r *kgo.Record) error {
					got <- string(r.Value)
					return nil
				}}},
				Checks: []metrics.Check{{Name: "store", Fn: func(context.Context) error {
					if !storeUp.Load() {
						return fmt.Errorf("store down")
					}
					return nil
				}}},
			}, nil
		})
	}()
	get := func(path string) (int, string) {
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			resp, err := http.Get("http://" + addr + path)
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				return resp.StatusCode, string(b)
			}
			if time.Now().After(deadline) {
				t.Fatalf("GET %s: %v", path, err)
			}
		}
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Errorf("/healthz %d", code)
	}
	if code, body := get("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "store down") {
		t.Errorf("/readyz with the store down: %d %s", code, body)
	}
	storeUp.Store(true)
	if code, body := get("/readyz"); code != 200 {
		t.Errorf("/readyz: %d %s", code, body)
	}
	if _, body := get("/metrics"); !strings.Contains(body, "lethe_dlq_records_total") && !strings.Contains(body, "go_goroutines") {
		t.Errorf("/metrics: %.200s", body)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "erasure.intake", Value: []byte("hello")}).FirstErr(); err != nil {
		t.Fatalf("produce to a topic the service created: %v", err)
	}
	select {
	case v := <-got:
		if v != "hello" {
			t.Errorf("handler got %q", v)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the group never delivered")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("run: %v", err)
	}
}

func TestRunRefusesWithoutKeys(t *testing.T) {
	setEnv(t, "127.0.0.1:1")
	t.Setenv("LETHE_HMAC_KEY", "short")
	err := runEnv(context.Background(), func(context.Context, Env) (Spec, error) { return Spec{}, nil })
	if err == nil || !strings.Contains(err.Error(), "32") {
		t.Errorf("short HMAC key: %v", err)
	}
	t.Setenv("LETHE_HMAC_KEY", strings.Repeat("h", 32))
	t.Setenv("LETHE_KEK", "")
	if err := runEnv(context.Background(), func(context.Context, Env) (Spec, error) { return Spec{}, nil }); err == nil {
		t.Error("missing KEK accepted")
	}
}

// Every service needs the record MAC key: without it, anyone who can produce to
// erasure.requested or erasure.store.done could erase or complete a receipt.
func TestRunRefusesWithoutMACKey(t *testing.T) {
	setEnv(t, "127.0.0.1:1")
	t.Setenv("LETHE_MAC_KEY", "")
	err := runEnv(context.Background(), func(context.Context, Env) (Spec, error) { return Spec{}, nil })
	if err == nil || !strings.Contains(err.Error(), "LETHE_MAC_KEY") {
		t.Errorf("missing MAC key: %v", err)
	}
	t.Setenv("LETHE_MAC_KEY", "short")
	if err := runEnv(context.Background(), func(context.Context, Env) (Spec, error) { return Spec{}, nil }); err == nil || !strings.Contains(err.Error(), "32") {
		t.Errorf("short MAC key: %v", err)
	}
}

// --print-config prints every declared variable, the service's own included, secrets
// masked, and exits 0 without building the service; a bad setting exits 2 naming it.
func TestExecPrintConfig(t *testing.T) {
	setEnv(t, "k1:9092,k2:9092")
	t.Setenv("LETHE_INFLIGHT", "7")
	build := func(context.Context, Env, DeleterSettings[struct{}]) (Spec, error) {
		t.Error("--print-config built the service")
		return Spec{}, nil
	}
	var out, errs strings.Builder
	if code := Exec("test", []string{"--print-config"}, &out, &errs, build); code != 0 {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	for _, want := range []string{"LETHE_KAFKA_BROKERS=k1:9092,k2:9092\n", "LETHE_HMAC_KEY=****\n", "LETHE_MAC_KEY=****\n", "LETHE_INFLIGHT=7\n",
		"LETHE_BATCH_MAX=128\n", "LETHE_INFLIGHT_MAX=256\n", "LETHE_KAFKA_SASL_PASSWORD=\n", "LETHE_LOG_LEVEL=error\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--print-config lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "record-mac-key") || strings.Contains(out.String(), strings.Repeat("h", 32)) {
		t.Errorf("--print-config prints a secret:\n%s", out.String())
	}
	t.Setenv("LETHE_BATCH_WAIT", "soon")
	errs.Reset()
	if code := Exec("test", []string{"--print-config"}, &out, &errs, build); code != 2 || !strings.Contains(errs.String(), `LETHE_BATCH_WAIT "soon"`) {
		t.Errorf("bad setting: exit %d, %s", code, errs.String())
	}
	if code := Exec("test", []string{"--bogus"}, &out, &errs, build); code != 2 {
		t.Errorf("unknown flag: exit %d", code)
	}
}

// --version prints the build and exits 0 without reading the environment or building.
func TestExecVersion(t *testing.T) {
	t.Setenv("LETHE_BATCH_WAIT", "soon") // a bad setting --version does not read
	build := func(context.Context, Env, DeleterSettings[struct{}]) (Spec, error) {
		t.Error("--version built the service")
		return Spec{}, nil
	}
	var out, errs strings.Builder
	if code := Exec("test", []string{"--version"}, &out, &errs, build); code != 0 || !strings.HasPrefix(out.String(), "lethe dev (") {
		t.Fatalf("exit %d, printed %q %s", code, out.String(), errs.String())
	}
}
