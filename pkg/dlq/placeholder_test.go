package dlq_test

import (
	"testing"

	"github.com/lethe-erasure/lethe/pkg/dlq"
)

func TestIsPlaceholder(t *testing.T) {
	for id, want := range map[string]bool{
		"pseudonym:5f1d0b9e6c2a4f3e": true,
		"pseudonym:":                 false,
		"pseudonym:5F1D":             false,
		"pseudonym:alice":            false,
		"alice@example.com":          false,
		"x pseudonym:5f1d":           false,
	} {
		if got := dlq.IsPlaceholder(id); got != want {
			t.Errorf("IsPlaceholder(%q) = %t, want %t", id, got, want)
		}
	}
}
