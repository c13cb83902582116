package embedded_test

import (
	"bytes"
	"context"
	"encoding/xml"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/auth"
	"github.com/lethe-erasure/lethe/pkg/embedded"
	"github.com/lethe-erasure/lethe/pkg/integrity"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/subject"
)

// venvPython is the interpreter of the virtual environment make tools builds, with the
// Python client's pinned test requirements (clients/python/requirements-test.txt). The
// test fails without it: a missing interpreter or package must not pass as skipped.
func venvPython(t *testing.T) string {
	t.Helper()
	py, err := filepath.Abs(filepath.Join("..", "..", ".tools", "venv", "bin", "python"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(py, "-c", "import pytest, mypy, confluent_kafka.schema_registry.avro, langchain_core, llama_index.core, qdrant_client, yaml").CombinedOutput()
	if err != nil {
		t.Fatalf("%s cannot import the Python client's test requirements (run make tools): %v\n%s", py, err, out)
	}
	return py
}

// installClient builds the package clients/python as pip would install it from the
// repository (a wheel, in a copy of the source so that the build leaves nothing behind in
// the tree) and installs it into a directory of its own, which it returns.
func installClient(t *testing.T, py string) string {
	t.Helper()
	src := filepath.Join("..", "..", "clients", "python")
	tmp := t.TempDir()
	build, wheels, site := filepath.Join(tmp, "build"), filepath.Join(tmp, "wheels"), filepath.Join(tmp, "site")
	if err := os.CopyFS(filepath.Join(build, "src"), os.DirFS(filepath.Join(src, "src"))); err != nil {
		t.Fatal(err)
	}
	pyproject, err := os.ReadFile(filepath.Join(src, "pyproject.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(build, "pyproject.toml"), pyproject, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(py, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check", "--no-deps", "--no-build-isolation", "--wheel-dir", wheels, build).CombinedOutput(); err != nil {
		t.Fatalf("pip wheel: %v\n%s", err, out)
	}
	whl, err := filepath.Glob(filepath.Join(wheels, "lethe_client-*.whl"))
	if err != nil || len(whl) != 1 {
		t.Fatalf("wheels built: %v, %v; want one lethe_client wheel", whl, err)
	}
	if out, err := exec.Command(py, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps", "--no-index", "--target", site, whl[0]).CombinedOutput(); err != nil {
		t.Fatalf("pip install the wheel: %v\n%s", err, out)
	}
	return site
}

// junit is the part of pytest's JUnit XML report the test reads.
type junit struct {
	Suites []struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Errors   int `xml:"errors,attr"`
		Skipped  int `xml:"skipped,attr"`
		Cases    []struct {
			Class string `xml:"classname,attr"`
			Name  string `xml:"name,attr"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

// TestPythonClientPackage runs the Python client's test suite (clients/python/tests),
// installed from a wheel built from the repository, against this stack: erasures over
// HTTP, over erasure.intake as JSON and as Schema Registry Avro, receipts and the tenant's
// chain verified by the client's own implementation under the chain key, suppression
// checks, the intake's refusals, and chunks stamped by the lineage helpers written to the
// stack's Qdrant and erased. Nothing may be skipped. The stack then confirms from its
// side that the tenant's chain verifies under the key.
func TestPythonClientPackage(t *testing.T) {
	py := venvPython(t)
	site := installClient(t, py)

	const hmacSecret = "python-client-test-key-0123456789abcdef"
	const chainSecret = "python-client-chain-key-0123456789abcdef"
	key, err := subject.NewKey("k1", []byte(hmacSecret))
	if err != nil {
		t.Fatal(err)
	}
	chain, err := integrity.NewRing("chain1", map[string][]byte{"chain1": []byte(chainSecret)})
	if err != nil {
		t.Fatal(err)
	}
	token, hash := auth.NewToken()
	authn, err := auth.New(auth.Config{Tokens: []auth.Token{{Name: "pyclient", SHA256: hash, Tenants: []string{"pyclient"}}}})
	if err != nil {
		t.Fatal(err)
	}
	// The reference inventory and a second Qdrant store as LangChain's vector store writes
	// it (metadata nested under "metadata"); the client's lineage helpers read this file.
	ref, err := os.ReadFile(filepath.Join("..", "..", "deploy", "inventory.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	invPath := filepath.Join(t.TempDir(), "inventory.yaml")
	langchainDocs := `  - name: langchain_docs
    kind: qdrant
    locators:
      collections: ["docs_{tenant}"]
      subject_fields: [metadata.customer_id]
      session_fields: [metadata.session_id]
`
	if err := os.WriteFile(invPath, append(ref, langchainDocs...), 0o644); err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.Load(invPath)
	if err != nil {
		t.Fatal(err)
	}
	sys, err := embedded.Start(context.Background(), embedded.Options{Key: key, DataDir: t.TempDir(), Auth: authn, ChainKey: chain, Inventory: inv})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sys.Stop() })

	report := filepath.Join(t.TempDir(), "pytest.xml")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rfEs", "--junitxml", report, "tests")
	cmd.Dir = filepath.Join("..", "..", "clients", "python")
	cmd.Env = append(os.Environ(),
		"PYTHONPATH="+site, "PYTHONDONTWRITEBYTECODE=1",
		"LETHE_TEST_REQUIRE_STACK=1", "LETHE_TEST_INSTALLED="+site,
		"LETHE_TEST_URL="+sys.BaseURL, "LETHE_TEST_TOKEN="+token,
		"LETHE_TEST_TENANT=pyclient", "LETHE_TEST_OTHER_TENANT=pyother",
		"LETHE_TEST_BROKERS="+sys.Stack.Addrs.Kafka, "LETHE_TEST_REGISTRY=http://"+sys.Stack.Addrs.Registry,
		"LETHE_TEST_QDRANT="+sys.Stack.Addrs.Qdrant, "LETHE_TEST_INVENTORY="+invPath,
		"LETHE_TEST_HMAC_KEY="+hmacSecret, "LETHE_TEST_HMAC_KEY_ID=k1",
		"LETHE_TEST_CHAIN_KEY="+chainSecret, "LETHE_TEST_CHAIN_KEY_ID=chain1",
	)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	runErr := cmd.Run()
	t.Logf("pytest in %s:\n%s", time.Since(start).Round(time.Millisecond), out.String())
	if runErr != nil {
		t.Fatalf("pytest: %v", runErr)
	}
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var r junit
	if err := xml.Unmarshal(b, &r); err != nil || len(r.Suites) != 1 {
		t.Fatalf("pytest's report: %v, %d suites", err, len(r.Suites))
	}
	s := r.Suites[0]
	stack := 0
	for _, c := range s.Cases {
		if strings.HasSuffix(c.Class, "test_stack") {
			stack++
		}
	}
	if s.Tests == 0 || s.Failures+s.Errors+s.Skipped != 0 || stack < 11 {
		t.Fatalf("pytest ran %d tests (%d against the stack), %d failed, %d errors, %d skipped; want all run, at least 11 against the stack, none skipped",
			s.Tests, stack, s.Failures, s.Errors, s.Skipped)
	}
	v, err := (auditlog.Chain{Store: sys.Stack.Audit, Key: chain}).Verify(context.Background(), "pyclient")
	if err != nil || v.Records < 3 || v.Keyed != v.Records {
		t.Errorf("the tenant's chain after the Python client's erasures: %+v, %v; want at least 3 records, all keyed", v, err)
	}
}
