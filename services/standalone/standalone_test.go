package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/service"
)

// rawIdentifiers are every raw identifier the demo uses.
func rawIdentifiers() []string {
	var ids []string
	for _, c := range append([]customer{target}, bystanders...) {
		ids = append(ids, c.id)
		ids = append(ids, c.sessions...)
	}
	return ids
}

// TestDemoEndToEnd runs the whole pipeline, from an HTTP request to the receipt, on the
// embedded stack with the services' default configuration, asks the suppression check
// about the erased customer and a bystander, then reads everything Lethe wrote — logs (the
// check's included), every record on every topic (erasure.requested included: its
// identifiers are sealed, their key kept for the re-verification sweeps until the
// receipt's identifiers_shred_at; erasure.suppressions: pseudonyms only), the audit store
// and the key store on disk, the check's answer and the printed receipt — and fails on any
// raw identifier.
func TestDemoEndToEnd(t *testing.T) {
	t.Setenv("LETHE_HMAC_KEY", "")
	t.Setenv("LETHE_HMAC_KEY_FILE", "")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var stdout bytes.Buffer
	var stderr lockedBuffer // the demo's output and the services' logs write it concurrently
	o := options{demo: true, verbose: true, dataDir: t.TempDir()}
	cfg, err := loadConfig(o)
	if err != nil {
		t.Fatal(err)
	}
	a, err := start(ctx, o, cfg, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.demo(ctx, &stdout, &stderr); err != nil {
		a.Stop()
		t.Fatalf("demo: %v\n%s", err, stderr.String())
	}

	// The demo's second request erases a customer whose numeric id its app stores as an
	// integer in Qdrant: two requests, two receipts.
	if !strings.Contains(stderr.String(), "numeric-id customer erased") {
		t.Error("the demo did not report erasing the numeric-id customer")
	}
	// Discovery reported the key family outside the inventory (its output is in stderr,
	// which the leak scan below reads), and the support notes' mentions were redacted.
	if !strings.Contains(stderr.String(), uncoveredShape) || !strings.Contains(stderr.String(), "redacted to [erased]") {
		t.Errorf("the demo did not show discovery's finding or the redacted mentions:\n%s", stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var r event.Receipt
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil {
		t.Fatalf("last stdout line is not a receipt: %v", err)
	}
	if r.Status != event.ReceiptComplete || r.Seq != 1 || r.Hash == "" || r.AuditLogPII {
		t.Errorf("receipt %+v", r)
	}
	// The first request was INCOMPLETE (her CRM profile outside the inventory), and
	// completed once the demo added the suggested crm entry and re-drove it.
	if !strings.Contains(stderr.String(), "INCOMPLETE") || !strings.Contains(stderr.String(), "extended the inventory with [crm]") {
		t.Errorf("the demo did not show the first attempt INCOMPLETE and the inventory extended")
	}
	want := map[string]event.Status{"qdrant": event.StatusDeleted, "redis": event.StatusDeleted, "langgraph": event.StatusDeleted, "dataset": event.StatusDeleted, "audit_log": event.StatusNoPII, "crm": event.StatusDeleted}
	for _, s := range r.Stores {
		if want[s.Store] != s.Status || s.Verification.Remaining != 0 {
			t.Errorf("store %s: %s remaining %d", s.Store, s.Status, s.Verification.Remaining)
		}
		delete(want, s.Store)
	}
	if len(want) != 0 {
		t.Errorf("stores missing from the receipt: %v", want)
	}
	// The sweeps the aggregator service runs by default: the receipt says when the
	// identifiers' key goes (the last sweep, 7 days, plus 35 days of retention) and when
	// each store's bytes are physically gone (its inventory's physical_within).
	if r.IdentifiersShredAt == nil || r.IdentifiersShredAt.Sub(r.CompletedAt) != 42*24*time.Hour {
		t.Errorf("identifiers_shred_at %v, want completed_at + 42 days", r.IdentifiersShredAt)
	}
	for _, s := range r.Stores {
		if st, _ := a.Inventory.Entry(s.Store); st.PhysicalWithin > 0 && (s.PhysicalErasureDue == nil || s.PhysicalErasureDue.Sub(r.CompletedAt) != st.PhysicalWithin) {
			t.Errorf("store %s: physical_erasure_due %v, want completed_at + %s", s.Store, s.PhysicalErasureDue, st.PhysicalWithin)
		}
	}
	if r.Stores[0].Deleted != 47 {
		t.Errorf("qdrant deleted %d chunks, want 47 (30 tagged + 17 legacy session-only)", r.Stores[0].Deleted)
	}

	// The metrics of the services restarted with the extended inventory moved (the last
	// ones right after the receipt was published): the re-drive of crm, both receipts and
	// the second request; and the system is ready.
	var scrape string
	wants := []string{
		`lethe_requests_total{channel="http",regulation="GDPR",tenant="vastralaya"} 1`,
		`lethe_store_outcomes_total{kind="redis",status="DELETED",store="crm"} 1`,
		`lethe_store_outcomes_total{kind="qdrant",status="DELETED",store="qdrant"} 1`,
		`lethe_store_outcomes_total{kind="audit_log",status="NO_PII_BY_DESIGN",store="audit_log"} 1`,
		`lethe_store_duration_seconds_count{kind="dataset",store="dataset"} 1`,
		`lethe_receipts_total{tenant="vastralaya"} 2`,
		`lethe_erasure_duration_seconds_count 2`,
		`lethe_consumer_lag{group="lethe-aggregator",topic="erasure.store.done"} 0`,
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		scrape = get(t, a.BaseURL+"/metrics")
		missing := 0
		for _, want := range wants {
			if !strings.Contains(scrape, want) {
				missing++
				if time.Now().After(deadline) {
					t.Errorf("/metrics lacks %s", want)
				}
			}
		}
		if missing == 0 || time.Now().After(deadline) {
			break
		}
	}
	if ready := get(t, a.BaseURL+"/readyz"); !strings.Contains(ready, `"ready"`) {
		t.Errorf("/readyz: %s", ready)
	}

	// The erased customer and her sessions are suppressed for ingestion; a bystander is not.
	by := bystanders[0]
	checkBody, _ := json.Marshal(map[string]any{"tenant_id": demoTenant, "subject_ids": []string{target.id, by.id},
		"session_ids": append(append([]string{}, target.sessions...), by.sessions[0])})
	resp, err := http.Post(a.BaseURL+"/v1/suppressions/check", "application/json", bytes.NewReader(checkBody))
	if err != nil {
		t.Fatal(err)
	}
	checked, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var answer struct {
		Subjects, Sessions []struct {
			Suppressed bool   `json:"suppressed"`
			ReceiptID  string `json:"receipt_id"`
		}
	}
	if err := json.Unmarshal(checked, &answer); err != nil || resp.StatusCode != http.StatusOK || len(answer.Subjects) != 2 || len(answer.Sessions) != 3 {
		t.Fatalf("suppression check: %d %s (%v)", resp.StatusCode, checked, err)
	}
	if s := answer.Subjects; !s[0].Suppressed || s[0].ReceiptID != r.ReceiptID || s[1].Suppressed {
		t.Errorf("suppression check of the customer and a bystander: %+v, want suppressed and not", s)
	}
	if s := answer.Sessions; !s[0].Suppressed || !s[1].Suppressed || s[2].Suppressed {
		t.Errorf("suppression check of her two sessions and a bystander's: %+v, want suppressed, suppressed, not", s)
	}

	// Everything Lethe wrote, the answers of the status API included.
	written := map[string][]byte{"stdout": stdout.Bytes(), "logs and stderr": stderr.Bytes(), "metrics": []byte(scrape),
		"status":  []byte(get(t, a.BaseURL+"/v1/erasures/"+r.RequestID)),
		"list":    []byte(get(t, a.BaseURL+"/v1/erasures")),
		"receipt": []byte(get(t, a.BaseURL+"/v1/erasures/"+r.RequestID+"/receipt"))}
	written["suppression check"] = checked
	// The console: its pages and every answer of the API they render, after a legal hold
	// was placed by the customer's id (a POST body); the server's logs are stderr above.
	holdBody, _ := json.Marshal(map[string]string{"tenant_id": demoTenant, "subject_id": target.id, "store": "dataset",
		"legal_basis": "GDPR Art. 17(3)(e)", "reason": "case " + target.id})
	if resp, err := http.Post(a.BaseURL+"/v1/holds", "application/json", bytes.NewReader(holdBody)); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("hold: %v %v", resp, err)
	} else {
		held, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		written["hold"] = held
	}
	for _, p := range []string{"/console/", "/console/app.js", "/console/style.css", "/v1/whoami", "/v1/holds", "/v1/inventory",
		"/v1/dead-letters", "/v1/tenants/" + demoTenant + "/chain", "/v1/erasures?tenant=" + demoTenant} {
		page := get(t, a.BaseURL+p)
		if p == "/v1/holds" && !strings.Contains(page, "GDPR Art. 17(3)(e)") {
			t.Errorf("the console's holds lack the hold: %s", page)
		}
		written["console "+p] = []byte(page)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(a.Stack.Broker.Brokers...), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.ConsumeTopics(service.Topics...))
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	// every topic's records are polled until the expected ones all arrived: one fetch may
	// bring one topic's and not yet another's
	arrived := func() bool {
		return counts[event.TopicStoreDone] >= 12 && counts[event.TopicCompleted] >= 2 && counts[event.TopicRequested] >= 3 &&
			counts[event.TopicSuppressions] >= 1+len(target.sessions)
	}
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline) && !arrived(); {
		pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		cl.PollFetches(pctx).EachRecord(func(rec *kgo.Record) {
			counts[rec.Topic]++
			if rec.Topic == event.TopicRequested {
				var req event.Requested
				if err := a.Stack.Registry.Decode(ctx, event.Request, rec.Value, &req); err != nil {
					t.Fatal(err)
				}
				if req.Sealed == nil {
					t.Error("erasure.requested carries its identifiers unsealed")
				}
			}
			var b bytes.Buffer
			b.Write(rec.Key)
			b.Write(rec.Value)
			for _, h := range rec.Headers {
				b.WriteString(h.Key)
				b.Write(h.Value)
			}
			written["topic "+rec.Topic] = append(written["topic "+rec.Topic], b.Bytes()...)
		})
		pcancel()
	}
	cl.Close()
	// the first request's five stores, its re-drive for crm, the second request's six
	if counts[event.TopicStoreDone] != 12 || counts[event.TopicCompleted] != 2 || counts[event.TopicRequested] != 3 || counts[event.TopicSuppressions] < 1+len(target.sessions) {
		t.Errorf("records per topic: %v", counts)
	}
	for _, dlq := range []string{event.DLQ(event.TopicIntake), event.DLQ(event.TopicRequested), event.DLQ(event.TopicStoreDone)} {
		if counts[dlq] != 0 {
			t.Errorf("%d records dead-lettered on %s", counts[dlq], dlq)
		}
	}
	if err := a.Stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
	filepath.WalkDir(a.DataDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.Contains(p, "/redis/") {
			b, _ := os.ReadFile(p)
			written["data file "+strings.TrimPrefix(p, a.DataDir)] = b
		}
		return nil
	})
	if len(written) < 5 {
		t.Fatalf("read too little to judge: %d sources", len(written))
	}
	for where, b := range written {
		for _, id := range rawIdentifiers() {
			if bytes.Contains(b, []byte(id)) {
				t.Errorf("raw identifier %q found in %s", id, where)
			}
		}
	}
	if !bytes.Contains(stderr.Bytes(), []byte(`"subject_hash"`)) {
		t.Error("logs carry no subject_hash field: are logs captured?")
	}
	if !bytes.Contains(stderr.Bytes(), []byte(`"suppression check"`)) || !bytes.Contains(stderr.Bytes(), []byte(`"suppressions published"`)) {
		t.Error("logs lack the suppression check's or the aggregator's suppression line: are they captured?")
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET %s: %s %s", url, resp.Status, b)
	}
	return string(b)
}

// lockedBuffer is a bytes.Buffer safe for concurrent writers, as os.Stderr is.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *lockedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]byte(nil), b.buf.Bytes()...)
}
