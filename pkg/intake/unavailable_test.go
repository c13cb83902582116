package intake_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/lethe-erasure/lethe/pkg/auditlog/dynamo"
	"github.com/lethe-erasure/lethe/pkg/envelope"
	"github.com/lethe-erasure/lethe/pkg/envelope/dynamokeys"
	"github.com/lethe-erasure/lethe/pkg/intake"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

// gate forwards TCP connections to a server until Close, after which its port refuses
// connections and the ones it carried are cut: the server, seen from its clients, is down.
type gate struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func newGate(t *testing.T, target string) *gate {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &gate{ln: ln}
	t.Cleanup(g.Close)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			g.mu.Lock()
			g.conns = append(g.conns, c, up)
			g.mu.Unlock()
			go func() { io.Copy(up, c); up.Close() }()
			go func() { io.Copy(c, up); c.Close() }()
		}
	}()
	return g
}

func (g *gate) URL() string { return "http://" + g.ln.Addr().String() }

func (g *gate) Close() {
	g.ln.Close()
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, c := range g.conns {
		c.Close()
	}
	g.conns = nil
}

// refusals returns the logged refusals of unavailable components and checks that none
// names the subject.
func refusals(t *testing.T, logs *observer.ObservedLogs) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, e := range logs.All() {
		fields := e.ContextMap()
		for k, v := range fields {
			if s, ok := v.(string); ok && strings.Contains(s, "alice") {
				t.Errorf("log %q field %s names the subject: %s", e.Message, k, s)
			}
		}
		if e.Message == "request not accepted: component unavailable" {
			out = append(out, fields)
		}
	}
	return out
}

func errorOf(t *testing.T, b []byte) string {
	t.Helper()
	return decode[map[string]string](t, b)["error"]
}

// With DynamoDB (dynalite) down, the intake's 503 names the store that is down: the state
// store when an idempotency key must be looked up, the key store when identifiers must be
// sealed. The refusal is logged with the component and no identifier, and nothing is
// published.
func TestSubmitDynamoDBDown(t *testing.T) {
	e := setup(t)
	core, logs := observer.New(zap.InfoLevel)
	e.svc.Log = zap.New(core)
	target, err := url.Parse(testenv.DynamoDB(t))
	if err != nil {
		t.Fatal(err)
	}
	g := newGate(t, target.Host)
	client := dynamodb.New(dynamodb.Options{
		Region:           "us-east-1",
		Credentials:      credentials.NewStaticCredentialsProvider("test", "test", ""),
		BaseEndpoint:     aws.String(g.URL()),
		RetryMaxAttempts: 1,
	})
	ctx := context.Background()
	store, keys := dynamo.New(client, testenv.DynamoTable(t, "audit")), dynamokeys.New(client, testenv.DynamoTable(t, "keys"))
	if err := store.CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	if err := keys.CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	kek, err := envelope.NewKEK("kek1", map[string][]byte{"kek1": []byte("0123456789abcdef0123456789ABCDEF")})
	if err != nil {
		t.Fatal(err)
	}
	e.svc.Store, e.svc.Sealer = store, &envelope.Sealer{KEK: kek, Keys: keys}

	e.submit(t, body(t, nil), "Idempotency-Key", "order-1") // DynamoDB up: accepted
	g.Close()

	code, resp := e.do(t, "POST", "/v1/erasures", body(t, nil), "Idempotency-Key", "order-2")
	if code != http.StatusServiceUnavailable || errorOf(t, resp) != intake.ErrStateStoreUnavailable.Error() {
		t.Errorf("idempotency key with the state store down: %d %s, want 503 %q", code, resp, intake.ErrStateStoreUnavailable)
	}
	code, resp = e.do(t, "POST", "/v1/erasures", body(t, nil))
	if code != http.StatusServiceUnavailable || errorOf(t, resp) != intake.ErrKeyStoreUnavailable.Error() {
		t.Errorf("sealing with the key store down: %d %s, want 503 %q", code, resp, intake.ErrKeyStoreUnavailable)
	}
	got := refusals(t, logs)
	if len(got) != 2 || got[0]["component"] != "state_store" || got[1]["component"] != "key_store" || got[0]["tenant"] != "acme" {
		t.Errorf("logged refusals %v, want state_store then key_store for tenant acme", got)
	}
	for _, f := range got {
		if _, ok := f["request_id"]; ok {
			t.Errorf("refusal logs a request id: %v", f)
		}
		if msg, _ := f["error"].(string); !strings.Contains(msg, "DynamoDB") {
			t.Errorf("refusal does not log its cause: %v", f)
		}
	}
	if n := len(e.published(t)); n != 1 {
		t.Errorf("%d requests published, want only the one accepted while DynamoDB was up", n)
	}

	// Without an idempotency key and without sealing, the state store is not needed to
	// accept: the request is published and the aggregator records it from the event.
	e.svc.Sealer = nil
	e.submit(t, body(t, nil))
	if n := len(e.published(t)); n != 2 {
		t.Errorf("%d requests published, want 2", n)
	}
	if logs.FilterMessage("request state not recorded").Len() != 1 {
		t.Errorf("the unrecorded state is not logged: %v", logs.All())
	}
}
