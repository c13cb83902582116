package main

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/integrity"
)

// auditDir writes a directory store with a valid chain of n receipts for tenant "acme"
// and returns it closed.
func auditDir(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	s, err := auditlog.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	at := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	for i := range n {
		id := fmt.Sprintf("er_%d", i)
		if err := s.PutRequest(ctx, auditlog.Request{RequestID: id, TenantID: "acme", Attempt: 1}); err != nil {
			t.Fatal(err)
		}
		if _, err := auditlog.Issue(ctx, s, event.Receipt{ReceiptID: "rc_" + id, RequestID: id, TenantID: "acme",
			Status: event.ReceiptComplete, RequestedAt: at, CompletedAt: at.Add(time.Second), DueAt: at.AddDate(0, 0, 30)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// logRecords returns the log file of dir and the file offsets of its records, read by the
// documented format: a 16-byte header, then records of u32 length, u32 checked length,
// u32 checksum and the payload.
func logRecords(t *testing.T, dir string) (string, []int64) {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, "wal-*.log"))
	if len(m) != 1 {
		t.Fatalf("log files %v, want one", m)
	}
	b, err := os.ReadFile(m[0])
	if err != nil {
		t.Fatal(err)
	}
	var offs []int64
	for off := int64(16); off < int64(len(b)); off += 12 + int64(binary.LittleEndian.Uint32(b[off:])) {
		offs = append(offs, off)
	}
	return m[0], offs
}

// copyDir copies every file of dir into a new directory.
func copyDir(t *testing.T, dir string) string {
	t.Helper()
	dst := t.TempDir()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// dirSum is a checksum of the names and contents of everything in dir.
func dirSum(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00", strings.TrimPrefix(path, dir))
		if !d.IsDir() {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "%d\x00%s", len(b), b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

func runCLI(args ...string) result {
	var out, errOut strings.Builder
	c := &cli{getenv: func(string) string { return "" }, stdout: &out, stderr: &errOut}
	code := c.run(context.Background(), args)
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

// TestVerifyChainDamagedDirectory runs verify-chain on copies of an audit directory with
// one flipped byte in an early, a middle and the last record (header and payload), and
// with a torn last record: each exits 4 naming the record, and leaves the copy's bytes as
// they were. The intact directory verifies; one a running store holds is refused without
// being read, and only then is the operator told to stop a process.
func TestVerifyChainDamagedDirectory(t *testing.T) {
	dir := auditDir(t, 4)
	file, offs := logRecords(t, dir)
	name := filepath.Base(file)
	r := runCLI("audit", "verify-chain", "--audit-dir", dir)
	wantCode(t, r, exitOK)
	if !strings.Contains(r.stdout, "acme") || !strings.Contains(r.stdout, "ok") {
		t.Fatalf("verify-chain of the intact directory: %s", r)
	}
	full, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}

	last := len(offs) - 1
	tests := []struct {
		name   string
		record int   // index into offs
		at     int64 // byte flipped, relative to the record; -1: cut the last 3 bytes
	}{
		{"early record length", 1, 1},
		{"early record payload", 1, 12 + 5},
		{"middle record checksum", len(offs) / 2, 8},
		{"middle record payload", len(offs) / 2, 12 + 9},
		{"last record payload", last, 12 + 3},
		{"last byte of the log", last, int64(len(full)) - 1 - offs[last]},
		{"torn last record", last, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cp := copyDir(t, dir)
			data := append([]byte(nil), full...)
			if tt.at < 0 {
				data = data[:len(data)-3]
			} else {
				data[offs[tt.record]+tt.at] ^= 0x5a
			}
			if err := os.WriteFile(filepath.Join(cp, name), data, 0o600); err != nil {
				t.Fatal(err)
			}
			before := dirSum(t, cp)
			r := runCLI("audit", "verify-chain", "--audit-dir", cp)
			wantCode(t, r, exitProblem)
			want := fmt.Sprintf("record %d at offset %d of %s", tt.record+1, offs[tt.record], name)
			if !strings.Contains(r.stderr, want) {
				t.Errorf("stderr does not name %q: %s", want, r)
			}
			if strings.Contains(r.stderr, "stop") || strings.Contains(r.stdout, "pending") {
				t.Errorf("damaged store reported as pending or in use: %s", r)
			}
			if after := dirSum(t, cp); after != before {
				t.Errorf("verify-chain changed the directory")
			}
		})
	}

	t.Run("held by a running store", func(t *testing.T) {
		cp := copyDir(t, dir)
		s, err := auditlog.OpenDir(cp)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		r := runCLI("audit", "verify-chain", "--audit-dir", cp)
		wantCode(t, r, exitError)
		if !strings.Contains(r.stderr, "running process") {
			t.Errorf("stderr does not say a running process has the directory: %s", r)
		}
	})
}

// keyedAuditDir writes a directory store with a chain of n receipts for tenant "acme",
// linked with the chain key secret as chain1 when rebuilt is false; when rebuilt is
// true, the same receipts as a writer of the table would rebuild them: the first one
// altered, every hash recomputed, no chain MAC (it has no key).
func keyedAuditDir(t *testing.T, n int, secret string, rebuilt bool) string {
	t.Helper()
	k, err := integrity.NewRing("chain1", map[string][]byte{"chain1": []byte(secret)})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s, err := auditlog.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	at := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	prev := ""
	for i := range n {
		id := fmt.Sprintf("er_%d", i)
		if err := s.PutRequest(ctx, auditlog.Request{RequestID: id, TenantID: "acme", Attempt: 1}); err != nil {
			t.Fatal(err)
		}
		r := event.Receipt{ReceiptID: "rc_" + id, RequestID: id, TenantID: "acme",
			Status: event.ReceiptComplete, RequestedAt: at, CompletedAt: at.Add(time.Second), DueAt: at.AddDate(0, 0, 30)}
		if !rebuilt {
			if _, err := (auditlog.Chain{Store: s, Key: k}).Issue(ctx, r); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if i == 0 {
			r.Status = event.ReceiptPartial
		}
		r.Seq, r.PrevHash = int64(i+1), prev
		r.Hash = auditlog.HashReceipt(r)
		prev = r.Hash
		if err := s.PutReceipt(ctx, r); err != nil {
			t.Fatal(err)
		}
		if err := s.SwapHead(ctx, "acme", int64(i), auditlog.Head{Seq: r.Seq, Hash: r.Hash, RequestID: id, Receipt: r}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func runCLIEnv(env map[string]string, args ...string) result {
	var out, errOut strings.Builder
	c := &cli{getenv: func(k string) string { return env[k] }, stdout: &out, stderr: &errOut}
	code := c.run(context.Background(), args)
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

// verify-chain --keyed checks the chain MACs with LETHE_CHAIN_KEY: a chain the aggregator
// linked passes, a rebuilt one passes the unkeyed check and fails the keyed one, and so
// does a chain checked with another key; without a key --keyed is a usage error.
func TestVerifyChainKeyed(t *testing.T) {
	const secret, other = "chain-secret-0123456789abcdefghijklmn", "other-secret-0123456789abcdefghijklmn"
	linked, rebuilt := keyedAuditDir(t, 3, secret, false), keyedAuditDir(t, 3, secret, true)
	withKey := map[string]string{"LETHE_CHAIN_KEY": secret}
	r := runCLIEnv(withKey, "audit", "verify-chain", "--audit-dir", linked, "--keyed", "-o", "json")
	wantCode(t, r, exitOK)
	var out struct {
		Tenants []chainResult `json:"tenants"`
	}
	decode(t, r, &out)
	if len(out.Tenants) != 1 || out.Tenants[0].Keyed == nil || *out.Tenants[0].Keyed != 3 || out.Tenants[0].LastUnkeyed != 0 {
		t.Errorf("keyed check of the linked chain: %s", r)
	}
	wantCode(t, runCLIEnv(nil, "audit", "verify-chain", "--audit-dir", rebuilt), exitOK)
	if r := runCLIEnv(withKey, "audit", "verify-chain", "--audit-dir", rebuilt, "--keyed"); r.code != exitProblem || !strings.Contains(r.stdout, "carries no chain MAC") {
		t.Errorf("keyed check of the rebuilt chain: %s", r)
	}
	if r := runCLIEnv(map[string]string{"LETHE_CHAIN_KEY": other}, "audit", "verify-chain", "--audit-dir", linked, "--keyed"); r.code != exitProblem {
		t.Errorf("keyed check with another key: %s", r)
	}
	if r := runCLIEnv(nil, "audit", "verify-chain", "--audit-dir", linked, "--keyed"); r.code != exitUsage || !strings.Contains(r.stderr, "LETHE_CHAIN_KEY") {
		t.Errorf("--keyed without a key: %s", r)
	}
}
