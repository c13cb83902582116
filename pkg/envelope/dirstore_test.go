package envelope_test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/envelope"
	"github.com/lethe-erasure/lethe/pkg/envelope/keystoretest"
)

func TestDirKeyStoreConformance(t *testing.T) {
	keystoretest.Run(t, func(t *testing.T) envelope.KeyStore { return dirStore(t) })
}

// files returns the content of every regular file under dir.
func files(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		out[p] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestDirKeyStoreDurableAndShredLeavesNoKey(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s, err := envelope.NewDirKeyStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	sealer := &envelope.Sealer{KEK: ring(t, "k1", map[string][]byte{"k1": randKey(t)}), Keys: s}
	a := seal(t, sealer, "er_a", "alice")
	b := seal(t, sealer, "er_b", "bob")
	wa, err := s.Get(ctx, "er_a")
	if err != nil {
		t.Fatal(err)
	}
	if err := sealer.Shred(ctx, "er_a"); err != nil {
		t.Fatal(err)
	}
	for p, content := range files(t, dir) {
		if bytes.Contains(content, wa) {
			t.Fatalf("%s still holds the destroyed wrapped key", filepath.Base(p))
		}
	}
	// A leftover temporary file from a crash is removed on open.
	if err := os.WriteFile(filepath.Join(dir, ".tmp", "leftover"), wa, 0o600); err != nil {
		t.Fatal(err)
	}

	reopened, err := envelope.NewDirKeyStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, ".tmp", "leftover")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("temporary file survived reopening: %v", err)
	}
	again := &envelope.Sealer{KEK: sealer.KEK, Keys: reopened}
	open(t, again, "er_b", b, "bob")
	if _, err := again.Open(ctx, "er_a", a); !errors.Is(err, envelope.ErrShredded) {
		t.Fatalf("Open after reopening = %v, want ErrShredded (the tombstone is durable)", err)
	}
	if err := reopened.Create(ctx, "er_a", wa); !errors.Is(err, envelope.ErrShredded) {
		t.Fatalf("Create after reopening = %v, want ErrShredded", err)
	}
}

func TestDirKeyStoreRejectsCorruptFile(t *testing.T) {
	dir := t.TempDir()
	s, err := envelope.NewDirKeyStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Create(t.Context(), "er_1", []byte("w")); err != nil {
		t.Fatal(err)
	}
	for p := range files(t, filepath.Join(dir, "keys")) {
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Get(t.Context(), "er_1"); !errors.Is(err, envelope.ErrCorrupt) {
		t.Fatalf("Get of an empty key file = %v, want ErrCorrupt", err)
	}
}
