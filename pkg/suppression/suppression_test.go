package suppression_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/auth"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/intake"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/subject"
	"github.com/lethe-erasure/lethe/pkg/suppression"
)

const acmeToken = "lt_acme-ingest-0123456789abcdefghijklmnopqrstuv"

// fixture is a running intake over a directory audit store, with one tenant-scoped token.
type fixture struct {
	key   subject.Key
	store *auditlog.DirStore
	srv   *httptest.Server
	dir   string
}

func startIntake() (*fixture, error) {
	dir, err := os.MkdirTemp("", "lethe-suppression-")
	if err != nil {
		return nil, err
	}
	st, err := auditlog.OpenDir(dir)
	if err != nil {
		return nil, err
	}
	key, err := subject.NewKey("k1", []byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		return nil, err
	}
	a, err := auth.New(auth.Config{Tokens: []auth.Token{{Name: "ingest", SHA256: auth.HashToken(acmeToken), Tenants: []string{"acme"}}}})
	if err != nil {
		return nil, err
	}
	svc := &intake.Service{Key: key, Inventory: inventory.Reference(), Store: st, Policy: intake.DefaultPolicy(), Auth: a}
	return &fixture{key: key, store: st, srv: httptest.NewServer(svc.Handler()), dir: dir}, nil
}

func (f *fixture) url() string { return f.srv.URL }

// erased records the erasure of subject (and its sessions) in tenant as the aggregator
// does when it issues the receipt.
func (f *fixture) erased(tenant, subjectID string, sessions ...string) error {
	req := auditlog.Request{RequestID: "er_" + tenant + "_1", TenantID: tenant, RequestedAt: time.Now()}
	for _, s := range sessions {
		req.SessionHashes = append(req.SessionHashes, f.key.SessionPseudonym(tenant, s))
	}
	rc := event.Receipt{ReceiptID: "rcpt-1", RequestID: req.RequestID, TenantID: tenant, SubjectHash: f.key.Pseudonym(tenant, subjectID),
		KeyID: "k1", Scope: event.ScopeSubject, CompletedAt: time.Now()}
	for _, s := range auditlog.SuppressionsOf(req, rc) {
		if _, _, err := auditlog.Suppress(context.Background(), f.store, s, req.RequestedAt); err != nil {
			return err
		}
	}
	return nil
}

func (f *fixture) close() {
	f.srv.Close()
	f.store.Close()
	os.RemoveAll(f.dir)
}

func fixtureT(t *testing.T) *fixture {
	t.Helper()
	f, err := startIntake()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.close)
	return f
}

// An ingestion job asks before it writes a document of customer cust-42.
func Example() {
	lethe, err := startIntake() // a running intake in which cust-42 of acme was erased
	if err != nil {
		panic(err)
	}
	defer lethe.close()
	if err := lethe.erased("acme", "cust-42", "sess-9"); err != nil {
		panic(err)
	}

	c := &suppression.Client{BaseURL: lethe.url(), Token: acmeToken}
	for _, doc := range []struct{ customer, session string }{{"cust-42", "sess-1"}, {"cust-7", "sess-9"}, {"cust-7", "sess-2"}} {
		a, err := c.Check(context.Background(), "acme", []string{doc.customer}, []string{doc.session})
		if err != nil {
			panic(err) // when in doubt, do not write
		}
		fmt.Printf("%s/%s: skip=%v subject=%v session=%v\n", doc.customer, doc.session, a.AnySuppressed(), a.Subjects[0].Suppressed, a.Sessions[0].Suppressed)
	}
	// Output:
	// cust-42/sess-1: skip=true subject=true session=false
	// cust-7/sess-9: skip=true subject=false session=true
	// cust-7/sess-2: skip=false subject=false session=false
}

// Refusals come back as *Error with the status, and 429 with the wait.
func TestClientErrors(t *testing.T) {
	f := fixtureT(t)
	for _, tc := range []struct {
		name   string
		c      *suppression.Client
		tenant string
		want   int
	}{
		{"no token", &suppression.Client{BaseURL: f.url()}, "acme", http.StatusUnauthorized},
		{"another tenant", &suppression.Client{BaseURL: f.url(), Token: acmeToken}, "globex", http.StatusForbidden},
	} {
		_, err := tc.c.Check(context.Background(), tc.tenant, []string{"cust-42"}, nil)
		var e *suppression.Error
		if !errors.As(err, &e) || e.Status != tc.want || e.Message == "" {
			t.Errorf("%s: %v, want an *Error with status %d and a reason", tc.name, err, tc.want)
		}
	}
	_, err := (&suppression.Client{BaseURL: f.url(), Token: acmeToken}).Check(context.Background(), "acme", nil, nil)
	if e := new(suppression.Error); !errors.As(err, &e) || e.Status != http.StatusBadRequest {
		t.Errorf("no identifiers: %v, want 400", err)
	}
	limited := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { auth.WriteTooManyRequests(w, 3*time.Second) }))
	defer limited.Close()
	_, err = (&suppression.Client{BaseURL: limited.URL}).Check(context.Background(), "acme", []string{"x"}, nil)
	if e := new(suppression.Error); !errors.As(err, &e) || e.Status != http.StatusTooManyRequests || e.RetryAfter != 3*time.Second {
		t.Errorf("rate limited: %#v, want 429 with a 3 s wait", err)
	}
}

// pythonSnippet returns the Python code block of docs/suppression.md: the test runs the
// snippet the documentation shows.
func pythonSnippet(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "suppression.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```python\n(.*?)```").FindSubmatch(b)
	if m == nil {
		t.Fatal("docs/suppression.md has no python block")
	}
	return string(m[1])
}

// The documented Python snippet, run with python3 against a running intake, answers
// erased and not-erased identifiers and exits 1 exactly when one is erased.
func TestPythonSnippet(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 is required (bash .ci/run installs it)")
	}
	f := fixtureT(t)
	if err := f.erased("acme", "cust-42", "sess-9"); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "check.py")
	if err := os.WriteFile(script, []byte(pythonSnippet(t)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
		code int
	}{
		{[]string{"acme", "cust-42"}, `{"subjects": [true], "sessions": []}`, 1},
		{[]string{"acme", "cust-7", "sess-1", "sess-9"}, `{"subjects": [false], "sessions": [false, true]}`, 1},
		{[]string{"acme", "cust-7", "sess-1"}, `{"subjects": [false], "sessions": [false]}`, 0},
	} {
		cmd := exec.Command(py, append([]string{script}, tc.args...)...)
		cmd.Env = append(os.Environ(), "LETHE_URL="+f.url(), "LETHE_TOKEN="+acmeToken)
		out, err := cmd.Output()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(string(out)); got != tc.want || code != tc.code {
			t.Errorf("check.py %v: %s (exit %d), want %s (exit %d)", tc.args, got, code, tc.want, tc.code)
		}
	}
	cmd := exec.Command(py, script, "globex", "cust-42")
	cmd.Env = append(os.Environ(), "LETHE_URL="+f.url(), "LETHE_TOKEN="+acmeToken)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "suppression check refused: 403") {
		t.Errorf("check.py for another tenant: %v %s, want a refusal with 403", err, out)
	}
}
