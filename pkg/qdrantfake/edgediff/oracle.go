// Package edgediff checks the emulator (pkg/qdrantfake) against Qdrant's own engine. The
// engine runs in Qdrant Edge (the qdrant-edge-py package, pinned in requirements.txt here
// and installed into .tools/venv by make tools) inside a Python program, oracle.py, that
// answers one JSON request a line.
//
// Connect gives a client of a fresh emulator whose every call is replayed on an Edge shard
// after the emulator has answered it: writes are applied to both, and the answers of
// reads (counts, scroll pages, gets, nearest queries) are compared. Each difference is a
// Divergence; the test fails with them when it ends. docs/qdrant-emulator.md says what
// the comparison covers and what it cannot see.
package edgediff

import (
	"bufio"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/testenv"
)

//go:embed oracle.py
var oracleSource string

// EnvPython names a Python with qdrant-edge-py installed; unset, the suite looks for
// .tools/venv/bin/python in the working directory or a parent.
const EnvPython = "LETHE_TEST_QDRANT_EDGE_PYTHON"

// EdgeVersion is the qdrant-edge-py version the suite is pinned to. An oracle of another
// version fails to start.
const EdgeVersion = "0.9.0"

// Python returns the Python that runs the oracle: $EnvPython, or .tools/venv's.
func Python() (string, error) { return testenv.Tool(EnvPython, "venv", "bin", "python") }

// Oracle is one running oracle.py. Calls are serialised.
type Oracle struct {
	mu     sync.Mutex
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	stderr *strings.Builder
}

// StartOracle starts the oracle and fails t when it cannot: the suite never skips. The
// oracle is stopped when t ends.
func StartOracle(t testing.TB) *Oracle {
	t.Helper()
	o, err := startOracle()
	if err != nil {
		t.Fatalf("edgediff: Qdrant Edge oracle: %v", err)
	}
	t.Cleanup(o.close)
	return o
}

func startOracle() (*Oracle, error) {
	py, err := Python()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(py, "-c", oracleSource)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stderr := &strings.Builder{}
	cmd.Stderr = stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", py, err)
	}
	o := &Oracle{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<20), stderr: stderr}
	line, err := o.out.ReadBytes('\n')
	if err != nil {
		o.close()
		return nil, fmt.Errorf("%s exited: %v\n%s", py, err, stderr)
	}
	var hello struct {
		Version string `json:"qdrant_edge"`
	}
	if err := json.Unmarshal(line, &hello); err != nil || hello.Version != EdgeVersion {
		o.close()
		return nil, fmt.Errorf("%s: want qdrant-edge-py %s, got greeting %q", py, EdgeVersion, line)
	}
	return o, nil
}

func (o *Oracle) close() {
	_ = o.in.Close()
	_ = o.cmd.Wait()
}

// errOracle is an error the engine answered (not a broken oracle).
type errOracle struct{ msg string }

func (e errOracle) Error() string { return "edge: " + e.msg }

// Do sends req and decodes the answer into resp (which may be nil). An error the engine
// raised is an errOracle; any other error means the oracle broke.
func (o *Oracle) Do(req map[string]any, resp any) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	if _, err := o.in.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("oracle: %w\n%s", err, o.stderr)
	}
	line, err := o.out.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("oracle: %w\n%s", err, o.stderr)
	}
	var head struct {
		Error *string `json:"error"`
	}
	if err := json.Unmarshal(line, &head); err != nil {
		return fmt.Errorf("oracle answered %q: %w", line, err)
	}
	if head.Error != nil {
		return errOracle{*head.Error}
	}
	if resp == nil {
		return nil
	}
	d := json.NewDecoder(strings.NewReader(string(line)))
	d.UseNumber()
	return d.Decode(resp)
}

// Batch sends reqs as one line and returns their answers in order: each the answer's
// JSON, or an errOracle for an error the engine raised. An error means the oracle broke.
func (o *Oracle) Batch(reqs []map[string]any) ([]json.RawMessage, []error, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	b, err := json.Marshal(reqs)
	if err != nil {
		return nil, nil, err
	}
	if _, err := o.in.Write(append(b, '\n')); err != nil {
		return nil, nil, fmt.Errorf("oracle: %w\n%s", err, o.stderr)
	}
	line, err := o.out.ReadBytes('\n')
	if err != nil {
		return nil, nil, fmt.Errorf("oracle: %w\n%s", err, o.stderr)
	}
	var answers []json.RawMessage
	if err := json.Unmarshal(line, &answers); err != nil || len(answers) != len(reqs) {
		return nil, nil, fmt.Errorf("oracle answered %d of %d: %.200s", len(answers), len(reqs), line)
	}
	errs := make([]error, len(answers))
	for i, a := range answers {
		var head struct {
			Error *string `json:"error"`
		}
		if err := json.Unmarshal(a, &head); err != nil {
			return nil, nil, fmt.Errorf("oracle answered %.200s: %w", a, err)
		}
		if head.Error != nil {
			errs[i] = errOracle{*head.Error}
		}
	}
	return answers, errs, nil
}

// IsEngineError reports whether err is an error the engine raised for a request.
func IsEngineError(err error) bool {
	var e errOracle
	return errors.As(err, &e)
}
