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
	_, err = s.Get(ctx, "er_a")
	shreddedAt, _ := envelope.ShreddedAt(err)
	if shreddedAt.IsZero() {
		t.Fatalf("Get after Shred = %v, want a tombstone with its time", err)
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
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	reopened, err := envelope.NewDirKeyStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer reopened.Close()
	if _, err := os.Stat(filepath.Join(dir, ".tmp", "leftover")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("temporary file survived reopening: %v", err)
	}
	again := &envelope.Sealer{KEK: sealer.KEK, Keys: reopened}
	open(t, again, "er_b", b, "bob")
	if _, err := again.Open(ctx, "er_a", a); !errors.Is(err, envelope.ErrShredded) {
		t.Fatalf("Open after reopening = %v, want ErrShredded (the tombstone is durable)", err)
	} else if at, _ := envelope.ShreddedAt(err); !at.Equal(shreddedAt) {
		t.Fatalf("tombstone time after reopening = %v, want %v", at, shreddedAt)
	}
	if err := reopened.Create(ctx, "er_a", wa); !errors.Is(err, envelope.ErrShredded) {
		t.Fatalf("Create after reopening = %v, want ErrShredded", err)
	}
}

func TestDirKeyStoreRejectsDamagedKey(t *testing.T) {
	dir := t.TempDir()
	s, err := envelope.NewDirKeyStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	w := []byte("wrapped-key-of-er_1")
	for _, id := range []string{"er_1", "er_2"} {
		if err := s.Create(t.Context(), id, w); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Flip one bit of the first stored copy of the key; the second record stays intact.
	damaged := 0
	for p, content := range files(t, dir) {
		if i := bytes.Index(content, w); i >= 0 {
			content[i+3] ^= 1
			if err := os.WriteFile(p, content, 0o600); err != nil {
				t.Fatal(err)
			}
			damaged++
		}
	}
	if damaged != 1 {
		t.Fatalf("damaged %d files, want the one log file", damaged)
	}
	s, err = envelope.NewDirKeyStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Get(t.Context(), "er_1"); !errors.Is(err, envelope.ErrCorrupt) {
		t.Fatalf("Get of a damaged key = %v, want ErrCorrupt", err)
	}
	if got, err := s.Get(t.Context(), "er_2"); err != nil || !bytes.Equal(got, w) {
		t.Fatalf("Get of the intact key = %q, %v", got, err)
	}
}
