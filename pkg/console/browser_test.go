package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/qdrant/go-client/qdrant"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/auth"
	"github.com/lethe-erasure/lethe/pkg/embedded"
	"github.com/lethe-erasure/lethe/pkg/intake"
	"github.com/lethe-erasure/lethe/pkg/subject"
)

// Identifiers the browser test types into the console; none may appear in a page's URL,
// title or text after submission, nor in the server's logs.
const (
	browserSubject = "alice-browser@example.com"
	browserSession = "sess-browser-7f3a"
)

// syncBuffer collects the server's log lines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) Sync() error    { return nil }
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// repoRoot is the directory of go.work, where .tools lives.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, _ := os.Getwd()
	for d := dir; d != "/"; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.work")); err == nil {
			return d
		}
	}
	t.Fatal("go.work not found above " + dir)
	return ""
}

// TestConsoleInBrowser drives the console in Debian's chromium through playwright-core
// (installed into .tools by `make tools`): log in, submit, watch the stores complete live,
// open the receipt and see the chain verified, cancel a scheduled request, approve a
// tenant offboarding as a second user, and be refused another tenant's request. It writes
// screenshots of the main pages to .tools/screenshots. The typed identifiers appear in no
// page and no log line.
func TestConsoleInBrowser(t *testing.T) {
	root := repoRoot(t)
	modules := filepath.Join(root, ".tools", "node_modules")
	if _, err := os.Stat(filepath.Join(modules, "playwright-core")); err != nil {
		t.Fatalf("playwright-core is not installed in %s (run make tools): %v", modules, err)
	}
	if _, err := os.Stat("/usr/bin/chromium"); err != nil {
		t.Fatalf("chromium is not installed (apt-get install chromium): %v", err)
	}
	tokens := map[string]string{}
	var toks []auth.Token
	for _, p := range []struct {
		name, tenant string
		roles        []string
	}{
		{"ops-acme", "acme", nil},
		{"dpo-acme", "acme", []string{auth.RoleApprover}},
		{"ops-globex", "globex", []string{auth.RoleApprover}},
	} {
		tok, hash := auth.NewToken()
		tokens[p.name] = tok
		toks = append(toks, auth.Token{Name: p.name, SHA256: hash, Tenants: []string{p.tenant}, Roles: p.roles})
	}
	authn, err := auth.New(auth.Config{Tokens: toks, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	key, err := subject.NewKey("k1", []byte("console-browser-test-key-0123456789"))
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	log := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), logs, zap.DebugLevel))
	ctx := context.Background()
	cfg := embedded.DefaultConfig()
	cfg.Intake.CancelWindow = intake.Windows{"LGPD": time.Hour}
	sys, err := embedded.Start(ctx, embedded.Options{Key: key, DataDir: t.TempDir(), Log: log, Auth: authn, Config: &cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sys.Stop() })

	seedCopies(ctx, t, sys)
	shots := filepath.Join(root, ".tools", "screenshots")
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "node", filepath.Join("browsertest", "console.cjs"))
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules, "LETHE_URL="+sys.BaseURL, "SCREENSHOTS="+shots,
		"TOKEN_OPS="+tokens["ops-acme"], "TOKEN_DPO="+tokens["dpo-acme"], "TOKEN_GLOBEX="+tokens["ops-globex"],
		"SUBJECT_ID="+browserSubject, "SESSION_ID="+browserSession)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	t.Logf("browser: %s", stderr.String())
	if runErr != nil {
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, "review") || strings.Contains(l, "addendum") || strings.Contains(l, "ERROR") || strings.Contains(l, "error") {
				t.Log(l)
			}
		}
		t.Fatalf("browser test failed: %v", runErr)
	}
	var res struct {
		Steps   []string `json:"steps"`
		Pages   []string `json:"pages"`
		Request string   `json:"request"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &res); err != nil {
		t.Fatalf("browser result %q: %v", stdout.String(), err)
	}
	want := []string{"login", "submit", "live", "receipt", "chain", "review-refused", "review", "cancel", "approve", "refused"}
	for _, w := range want {
		if !strings.Contains(strings.Join(res.Steps, ","), w) {
			t.Errorf("step %s not done: %v", w, res.Steps)
		}
	}
	st, err := sys.Intake.Status(ctx, res.Request)
	if err != nil || st.State != intake.StateComplete {
		t.Errorf("the request submitted in the browser: %+v %v", st.State, err)
	}
	for _, id := range []string{browserSubject, browserSession} {
		for i, p := range res.Pages {
			if strings.Contains(p, id) {
				t.Errorf("page %d of the console holds a typed identifier", i)
			}
		}
		if strings.Contains(logs.String(), id) {
			t.Errorf("the server's logs hold a typed identifier")
		}
	}
	ads, err := sys.Stack.Audit.AddendaOf(ctx, res.Request)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, ad := range ads {
		types = append(types, ad.Type)
	}
	slices.Sort(types)
	if !slices.Equal(types, []string{auditlog.AddendumItemErased, auditlog.AddendumReviewed, auditlog.AddendumReviewed}) {
		t.Errorf("addenda of the reviewed request %v; want two REVIEWED and one ITEM_ERASED", types)
	}
	if !strings.Contains(logs.String(), "erasure requested") {
		t.Error("no request was logged: the log scan saw nothing")
	}
}

// seedCopies writes the browser subject's chunk and two untagged chunks close to it into
// the reference inventory's Qdrant collection, which the receipt then lists for review.
func seedCopies(ctx context.Context, t *testing.T, sys *embedded.System) {
	t.Helper()
	q := sys.Stack.Qdrant
	const coll = "shopbot_acme"
	if ok, err := q.CollectionExists(ctx, coll); err != nil {
		t.Fatal(err)
	} else if !ok {
		if err := q.CreateCollection(ctx, &qdrant.CreateCollection{CollectionName: coll,
			VectorsConfig: qdrant.NewVectorsConfig(&qdrant.VectorParams{Size: 2, Distance: qdrant.Distance_Cosine})}); err != nil {
			t.Fatal(err)
		}
	}
	point := func(id uint64, v []float32, payload map[string]any) *qdrant.PointStruct {
		return &qdrant.PointStruct{Id: qdrant.NewIDNum(id), Vectors: qdrant.NewVectorsDense(v), Payload: qdrant.NewValueMap(payload)}
	}
	if _, err := q.Upsert(ctx, &qdrant.UpsertPoints{CollectionName: coll, Wait: qdrant.PtrOf(true), Points: []*qdrant.PointStruct{
		point(900001, []float32{1, 0}, map[string]any{"customer_id": browserSubject, "text": "order notes"}),
		point(900002, []float32{1, 0.01}, map[string]any{"text": "order notes, copied"}),
		point(900003, []float32{0.99, 0.02}, map[string]any{"text": "shipping page"}),
	}}); err != nil {
		t.Fatal(err)
	}
}
