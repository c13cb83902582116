package embedded_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/discovery"
	"github.com/lethe-erasure/lethe/pkg/embedded"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/postgresstore"
	"github.com/lethe-erasure/lethe/pkg/subject"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

// ragPython returns the interpreter of the RAG app's virtual environment: $LETHE_RAG_PYTHON,
// or .tools/rag-venv's (make tools builds it from examples/rag-app/requirements.txt). It
// fails t when there is none or a library the app uses does not import.
func ragPython(t *testing.T) string {
	t.Helper()
	py, err := testenv.Tool("LETHE_RAG_PYTHON", "rag-venv", "bin", "python")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(py, "-c", "import langchain_qdrant, langgraph.checkpoint.postgres, langchain_community.chat_message_histories, mem0, ragas, boto3, pytest").CombinedOutput()
	if err != nil {
		t.Fatalf("%s cannot import the RAG app's libraries (run make tools): %v\n%s", py, err, out)
	}
	return py
}

// A real RAG app (examples/rag-app: langchain-qdrant on the Qdrant emulator over gRPC,
// LangGraph's PostgresSaver on PostgreSQL, LangChain's RedisChatMessageHistory on
// redis-server, mem0 in Qdrant, a ragas evaluation set in the versioned S3 bucket) serves
// three users, one of whom also chatted before the app stamped lineage (by session only).
// Discovery then finds nothing the app's inventory leaves uncovered. The app erases that
// user through the intake; the receipt is COMPLETE; every library, reading back through
// its own API with the user's id and sessions, returns nothing of the user, and every
// other user's counts are unchanged.
func TestRAGAppErasedEndToEnd(t *testing.T) {
	py := ragPython(t)
	const tenant, erased = "helpdesk", "user-ana"
	ctx := context.Background()
	start := time.Now()

	inv, err := inventory.Load("../../deploy/examples/inventory-rag-app.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dsn := testenv.Postgres(t)
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	key, err := subject.NewKey("k1", []byte("embedded-test-key-0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := embedded.DefaultConfig()
	cfg.Deleter.Discovery.Tenants = []string{tenant}
	sys, err := embedded.Start(ctx, embedded.Options{Key: key, DataDir: t.TempDir(), Inventory: inv, Config: &cfg,
		Deleters: []embedded.Deleter{{Name: "postgres-deleter", Kind: postgresstore.Kind, Store: postgresstore.New(pool)}}})
	if err != nil {
		t.Fatal(err)
	}
	running := sys // Restart below replaces it
	t.Cleanup(func() {
		if running != nil {
			running.Stop()
		}
	})
	if sys.Stack.RedisKind != "redis-server" {
		t.Fatalf("redis: %s; the app needs a real redis-server", sys.Stack.RedisKind)
	}

	clientSrc, err := filepath.Abs(filepath.Join("..", "..", "clients", "python", "src"))
	if err != nil {
		t.Fatal(err)
	}
	appEnv := append(os.Environ(),
		"RAGAPP_QDRANT="+sys.Stack.Addrs.Qdrant,
		"RAGAPP_REDIS_URL=redis://"+sys.Stack.Addrs.Redis+"/0",
		"RAGAPP_POSTGRES_DSN="+dsn,
		"RAGAPP_S3_ENDPOINT=http://"+sys.Stack.Addrs.S3,
		"RAGAPP_S3_BUCKET="+embedded.DatasetBucket,
		"RAGAPP_STATE_DIR="+t.TempDir(),
		"LETHE_URL="+sys.BaseURL,
		// The app erases through the Python client of this repository.
		"PYTHONPATH="+clientSrc,
		"AWS_ACCESS_KEY_ID=lethe", "AWS_SECRET_ACCESS_KEY=lethe-local", "AWS_REGION=us-east-1")
	app := func(v any, args ...string) {
		t.Helper()
		c, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(c, py, append([]string{"ragapp.py"}, args...)...)
		cmd.Dir = filepath.Join("..", "..", "examples", "rag-app")
		cmd.Env = appEnv
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		began := time.Now()
		if err := cmd.Run(); err != nil {
			t.Fatalf("ragapp.py %s: %v\nstderr:\n%s", args[0], err, stderr.String())
		}
		if err := json.Unmarshal(stdout.Bytes(), v); err != nil {
			t.Fatalf("ragapp.py %s printed %q: %v", args[0], stdout.String(), err)
		}
		t.Logf("ragapp.py %s: %s", args[0], time.Since(began).Round(time.Millisecond))
	}

	var served struct{ Turns, Users int }
	app(&served, "converse", "--tenant", tenant)
	if served.Users != 3 || served.Turns < 9 {
		t.Fatalf("the app served %+v, want 3 users and their turns", served)
	}

	// Discovery over every store the deleters reach finds nothing outside the inventory.
	resp, err := http.Post(sys.BaseURL+"/discovery", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	var disc discovery.Response
	err = json.NewDecoder(resp.Body).Decode(&disc)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("discovery: %s, %v", resp.Status, err)
	}
	var kinds []string
	for _, r := range disc.Reports {
		kinds = append(kinds, r.Kind)
		if r.Error != "" || r.RunAt == nil || len(r.Uncovered) > 0 {
			t.Errorf("discovery of %s: error %q, uncovered %+v", r.Kind, r.Error, r.Uncovered)
		}
	}
	for _, k := range []string{"qdrant", "redis", "postgres", "dataset"} {
		if !slices.Contains(kinds, k) {
			t.Errorf("discovery ran for %v, not for %s", kinds, k)
		}
	}

	// The app's own end-to-end test (examples/rag-app/test_erasure.py, pytest): footprints
	// before and after, the erasure through the Python client between them. It writes
	// what it saw for the checks below.
	var result struct {
		Before, After map[string]map[string]int
		Erasure       struct {
			Receipt                json.RawMessage `json:"receipt"`
			HashRecomputed         string          `json:"receipt_hash_recomputed"`
			ChainRecordsVerified   int             `json:"chain_records_verified"`
			SessionsFoundInStores  int             `json:"sessions_found_in_stores"`
			MemoryHistoryRowsPrune int             `json:"mem0_history_rows_pruned"`
		}
	}
	resultFile := filepath.Join(t.TempDir(), "result.json")
	{
		c, cancel := context.WithTimeout(ctx, 5*time.Minute)
		cmd := exec.CommandContext(c, py, "-m", "pytest", "-p", "no:cacheprovider", "-rA", "-s", "test_erasure.py")
		cmd.Dir = filepath.Join("..", "..", "examples", "rag-app")
		cmd.Env = append(appEnv, "RAGAPP_RESULT="+resultFile, "RAGAPP_TENANT="+tenant, "RAGAPP_ERASED="+erased)
		out, err := cmd.CombinedOutput()
		cancel()
		t.Logf("pytest test_erasure.py:\n%s", out)
		if err != nil || !bytes.Contains(out, []byte("1 passed")) || bytes.Contains(out, []byte("skipped")) {
			t.Fatalf("the RAG app's end-to-end test: %v (want 1 passed, none skipped)", err)
		}
		b, err := os.ReadFile(resultFile)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &result); err != nil {
			t.Fatal(err)
		}
	}
	before, after, erasure := result.Before, result.After, result.Erasure
	if len(before) != 3 {
		t.Fatalf("footprint of %d users, want 3", len(before))
	}
	for lib, n := range before[erased] {
		if n == 0 {
			t.Errorf("before the erasure %s returns nothing of the user: the read-back would prove nothing", lib)
		}
	}
	var r event.Receipt
	if err := json.Unmarshal(erasure.Receipt, &r); err != nil {
		t.Fatal(err)
	}
	if r.Status != event.ReceiptComplete || r.TenantID != tenant {
		t.Errorf("receipt status %s, tenant %s; want COMPLETE for %s", r.Status, r.TenantID, tenant)
	}
	// The Python client recomputed the receipt's hash and verified the tenant's chain.
	if erasure.HashRecomputed != r.Hash || r.Hash != auditlog.HashReceipt(r) || erasure.ChainRecordsVerified < 1 {
		t.Errorf("the client recomputed hash %q over %d chain records; the receipt's is %q", erasure.HashRecomputed, erasure.ChainRecordsVerified, r.Hash)
	}
	t.Logf("receipt %s: hash %s recomputed by the Python client, %d chain records verified", r.ReceiptID, erasure.HashRecomputed, erasure.ChainRecordsVerified)
	if bytes.Contains(erasure.Receipt, []byte(erased)) || bytes.Contains(erasure.Receipt, []byte("ana-s")) {
		t.Error("the receipt holds the user's id or a session id")
	}
	deleted := map[string]int64{}
	for _, st := range r.Stores {
		deleted[st.Store] = st.Deleted
		if st.Verification.Remaining != 0 {
			t.Errorf("receipt: %s has %d remaining", st.Store, st.Verification.Remaining)
		}
	}
	for _, st := range inv.Stores {
		if _, ok := deleted[st.Name]; !ok {
			t.Errorf("receipt lacks store %s", st.Name)
		}
	}
	if erasure.SessionsFoundInStores != 2 {
		t.Errorf("the app tied %d sessions to the user in its stores, want 2", erasure.SessionsFoundInStores)
	}
	if erasure.MemoryHistoryRowsPrune != before[erased]["mem0 history.db rows (app prunes)"] {
		t.Errorf("the app pruned %d mem0 history rows, want the user's %d", erasure.MemoryHistoryRowsPrune, before[erased]["mem0 history.db rows (app prunes)"])
	}

	t.Logf("Lethe's erasure left %d rows of mem0's SQLite history (memory text by memory id, out of its reach); the app pruned them", erasure.MemoryHistoryRowsPrune)

	var libs []string
	for lib := range before[erased] {
		libs = append(libs, lib)
	}
	sort.Strings(libs)
	var table strings.Builder
	fmt.Fprintf(&table, "%-44s %14s %14s\n", "library read-back", "erased before", "erased after")
	for _, lib := range libs {
		fmt.Fprintf(&table, "%-44s %14d %14d\n", lib, before[erased][lib], after[erased][lib])
		if after[erased][lib] != 0 {
			t.Errorf("after the erasure %s still returns %d items of the user", lib, after[erased][lib])
		}
	}
	t.Logf("the erased user, per library (receipt: deleted %v):\n%s", deleted, table.String())
	for user, counts := range before {
		if user == erased {
			continue
		}
		for lib, n := range counts {
			// An older version of the evaluation set that held the erased user's rows is
			// deleted whole, the other users' rows in it too: theirs live on in the current
			// object, which the samples count checks.
			if lib == "ragas older S3 versions' samples" {
				continue
			}
			if after[user][lib] != n {
				t.Errorf("%s of another user: %d before, %d after", lib, n, after[user][lib])
			}
		}
		t.Logf("another user unchanged: %v", after[user])
	}
	t.Logf("end to end in %s", time.Since(start).Round(time.Millisecond))

	// The control: without the entries for mem0's collection and LangGraph's tables the
	// same discovery names both, so its silence above was not for want of looking.
	reduced := &inventory.Inventory{Version: inv.Version + "-reduced"}
	for _, st := range inv.Stores {
		if st.Name != "mem0_memories" && st.Name != "langgraph_checkpoints" {
			reduced.Stores = append(reduced.Stores, st)
		}
	}
	sys, err = sys.Restart(ctx, reduced)
	if err != nil {
		running = nil
		t.Fatal(err)
	}
	running = sys
	resp, err = http.Post(sys.BaseURL+"/discovery", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	disc = discovery.Response{}
	err = json.NewDecoder(resp.Body).Decode(&disc)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, r := range disc.Reports {
		for _, u := range r.Uncovered {
			found = append(found, u.Location)
		}
	}
	sort.Strings(found)
	if want := []string{"lg_{tenant}.checkpoint_blobs", "lg_{tenant}.checkpoint_writes", "lg_{tenant}.checkpoints", "mem0_" + tenant}; !slices.Equal(found, want) {
		t.Errorf("discovery without mem0's and LangGraph's entries found %q, want %q", found, want)
	}
}
