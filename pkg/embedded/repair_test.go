package embedded_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/embedded"
	"github.com/lethe-erasure/lethe/pkg/subject"
)

// Starting on an audit directory whose last record is torn (a crash during an append)
// cuts it off and logs what was cut: file, offset, record and bytes.
func TestStartLogsWhatItCut(t *testing.T) {
	dataDir := t.TempDir()
	auditDir := filepath.Join(dataDir, "audit")
	s, err := auditlog.OpenDir(auditDir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutRequest(context.Background(), auditlog.Request{RequestID: "er_1", TenantID: "acme", Attempt: 1}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	logs, _ := filepath.Glob(filepath.Join(auditDir, "wal-*.log"))
	if len(logs) != 1 {
		t.Fatalf("log files %v", logs)
	}
	fi, err := os.Stat(logs[0])
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(logs[0], os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte{40, 0, 0, 0, 40, 0, 0, 0, 1, 2, 3}) // a record header cut short by a crash
	f.Close()

	core, seen := observer.New(zapcore.WarnLevel)
	key, err := subject.NewKey("k1", []byte("embedded-test-key-0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	sys, err := embedded.Start(context.Background(), embedded.Options{Key: key, DataDir: dataDir, Log: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Stop()
	var found bool
	for _, e := range seen.FilterMessageSnippet("repaired on open").All() {
		c := e.ContextMap()
		found = found || c["store"] == "audit" && c["file"] == filepath.Base(logs[0]) &&
			c["offset"] == fi.Size() && c["record"] == int64(2) && c["bytes"] == int64(11) && strings.HasPrefix(fmt.Sprint(c["repair"]), "cut 11 bytes")
	}
	if !found {
		t.Errorf("no warning of the cut record 2 (11 bytes at offset %d); logged: %+v", fi.Size(), seen.All())
	}
	if _, err := sys.Stack.Audit.GetRequest(context.Background(), "er_1"); err != nil {
		t.Errorf("the acknowledged request was lost: %v", err)
	}
}
