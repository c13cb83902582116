package rows

import (
	"slices"
	"strings"
	"testing"
	"unicode"
)

func TestFinderRule(t *testing.T) {
	f := NewFinder("cust-42", "s-1", "sess-cust-42")
	for _, tc := range []struct {
		in, want string
	}{
		{"ticket from cust-42.", "ticket from [erased]."},
		{"cust-42", "[erased]"},
		{`{"who": "cust-42"}`, `{"who": "[erased]"}`},
		{"(cust-42) and cust-42, again", "([erased]) and [erased], again"},
		{"cust-421", "cust-421"},
		{"xcust-42", "xcust-42"},
		{"cust-42:7", "cust-42:7"},
		{"x/cust-42", "x/cust-42"},
		{"cust-42. Next", "[erased]. Next"},
		{"sess-cust-42 seen", "[erased] seen"},
		{"s-1", "[erased]"},                  // a short id as a whole cell
		{"with s-1 in it", "with s-1 in it"}, // not in free text
		{"cats", "cats"},
	} {
		if got := f.redact(tc.in); got != tc.want {
			t.Errorf("redact(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if f.in(tc.in) != (tc.in != tc.want) {
			t.Errorf("in(%q) = %v", tc.in, f.in(tc.in))
		}
	}
}

// FuzzMentionTokens: whenever the mention rule finds an identifier without split runes in
// a string, the string's mention tokens hold that identifier, so a summary never hides a
// mention.
func FuzzMentionTokens(f *testing.F) {
	for _, s := range [][2]string{{"ticket from cust-42.", "cust-42"}, {"(a@b.c)", "a@b.c"}, {"ab", "ab"}, {"x=cust-1!? y", "cust-1!"}, {"é cust-1", "cust-1"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, s, id string) {
		if id == "" || strings.ContainsFunc(id, IsSplit) {
			return
		}
		if !(&Finder{IDs: []string{id}}).in(s) {
			return
		}
		found := false
		MentionTokens(s, func(tok string) { found = found || tok == id })
		if !found {
			t.Fatalf("%q mentions %q but its tokens do not hold it", s, id)
		}
	})
}

// FuzzMentionTokensAreFieldsPieces: MentionTokens gives, in order, the strings the
// definition names (the pieces of strings.FieldsFunc at white space and the delimiters,
// each also without a final . : ! or ?), on any input, invalid UTF-8 included.
func FuzzMentionTokensAreFieldsPieces(f *testing.F) {
	for _, s := range []string{"ticket from cust-42.", "a\u00a0b\u2003cust-1!? x", "(a@b.c)", "ab", "", "  ", "\xff\xfecust-9;", "é=é=é=é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var want []string
		if len(s) < minSubstring {
			want = append(want, s)
		}
		for _, p := range strings.FieldsFunc(s, func(r rune) bool {
			return unicode.IsSpace(r) || strings.ContainsRune(`"'()[]{}<>,;=`, r)
		}) {
			if len(p) >= minSubstring {
				want = append(want, p)
			}
			if n := len(p) - 1; n >= minSubstring && strings.ContainsRune(".:!?", rune(p[n])) {
				want = append(want, p[:n])
			}
		}
		var got []string
		MentionTokens(s, func(tok string) { got = append(got, tok) })
		if !slices.Equal(got, want) {
			t.Fatalf("tokens of %q: %q, want %q", s, got, want)
		}
	})
}
