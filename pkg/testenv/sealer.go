package testenv

import (
	"crypto/rand"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/envelope"
)

// Sealer returns a sealer of identifiers with a random key-encryption key over a directory
// key store in a temporary directory, closed when t ends.
func Sealer(t testing.TB) *envelope.Sealer {
	t.Helper()
	secret := make([]byte, envelope.KeySize)
	rand.Read(secret)
	kek, err := envelope.NewKEK("k", map[string][]byte{"k": secret})
	if err != nil {
		t.Fatal(err)
	}
	keys, err := envelope.NewDirKeyStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { keys.Close() })
	return &envelope.Sealer{KEK: kek, Keys: keys}
}
