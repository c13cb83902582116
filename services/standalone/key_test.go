package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/subject"
)

// The throwaway key's id, printed and kept in receipts, holds no byte of its secret.
func TestEphemeralKeyIDHoldsNoSecret(t *testing.T) {
	draw := make([]byte, 36)
	for i := range draw {
		draw[i] = byte(i + 1)
	}
	key, err := ephemeralKey(bytes.NewReader(draw))
	if err != nil {
		t.Fatal(err)
	}
	want, err := subject.NewKey(key.ID(), draw[4:])
	if err != nil {
		t.Fatal(err)
	}
	if key.Pseudonym("acme", "alice") != want.Pseudonym("acme", "alice") {
		t.Fatal("the secret is not the draw after the id")
	}
	for i := 0; i+4 <= 32; i++ {
		if strings.Contains(key.ID(), fmt.Sprintf("%x", draw[4+i:4+i+4])) {
			t.Errorf("key id %q holds secret bytes %d..%d", key.ID(), i, i+4)
		}
	}
}
