package testenv

import (
	"crypto/rand"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/envelope"
	"github.com/lethe-erasure/lethe/pkg/integrity"
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

// Ring returns an integrity key ring holding secret under id, current.
func Ring(t testing.TB, id, secret string) *integrity.Ring {
	t.Helper()
	r, err := integrity.NewRing(id, map[string][]byte{id: []byte(secret)})
	if err != nil {
		t.Fatal(err)
	}
	return r
}
