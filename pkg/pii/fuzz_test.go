package pii

import (
	"strings"
	"testing"
)

// FuzzMask checks Mask's contract on any input: it does not panic, masking again changes
// nothing, nothing it detects survives, text without any item is returned unchanged, and
// every placeholder it writes is one of the five.
func FuzzMask(f *testing.F) {
	for _, tc := range detectorCases {
		f.Add(tc.in)
	}
	f.Add(letheText)
	f.Fuzz(func(t *testing.T, s string) {
		m := Mask(s)
		if again := Mask(m); again != m {
			t.Fatalf("Mask not idempotent:\n in    %q\n once  %q\n twice %q", s, m, again)
		}
		if Contains(m) {
			t.Fatalf("Mask(%q) = %q still contains an item", s, m)
		}
		if Contains(s) != (m != s) {
			t.Fatalf("Contains(%q) = %v, but Mask gives %q", s, Contains(s), m)
		}
		if n := placeholders(m) - placeholders(s); m != s && n <= 0 {
			t.Fatalf("Mask(%q) = %q changed the text without writing a placeholder", s, m)
		}
	})
}

func placeholders(s string) int {
	n := 0
	for _, p := range placeholder[1:] {
		n += strings.Count(s, p)
	}
	return n
}
