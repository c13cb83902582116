package qdrantfake

import (
	"slices"
	"strings"
	"unicode"

	"github.com/qdrant/go-client/qdrant"
)

// textMatch answers a full-text match through a text index, or returns nil for a match
// a text index does not serve. The stored strings and the query are tokenised alike (the
// word tokenizer splits on every character that is not a letter or digit, the whitespace
// tokenizer on whitespace) and lowercased unless the index says otherwise. "text" passes
// a value holding every query token, "text_any" one holding any, "phrase" one holding the
// tokens in a row, and only when the index was built with phrase_matching; the mutable
// index Qdrant builds without it finds no phrase (full_text_index_read.rs,
// check_payload_match).
func (idx *fieldIndex) textMatch(m *qdrant.Match) func(map[string]*qdrant.Value) bool {
	var query string
	var test func(doc, q []string) bool
	switch v := m.GetMatchValue().(type) {
	case *qdrant.Match_Text:
		query, test = v.Text, func(doc, q []string) bool {
			for _, t := range q {
				if !slices.Contains(doc, t) {
					return false
				}
			}
			return true
		}
	case *qdrant.Match_TextAny:
		query, test = v.TextAny, func(doc, q []string) bool {
			for _, t := range q {
				if slices.Contains(doc, t) {
					return true
				}
			}
			return false
		}
	case *qdrant.Match_Phrase:
		if !idx.text.GetPhraseMatching() {
			return func(map[string]*qdrant.Value) bool { return false }
		}
		query, test = v.Phrase, func(doc, q []string) bool {
			for i := 0; i+len(q) <= len(doc); i++ {
				if slices.Equal(doc[i:i+len(q)], q) {
					return true
				}
			}
			return false
		}
	default:
		return nil
	}
	q := idx.tokens(query)
	if len(q) == 0 {
		// A query without a token (no letter or digit for the word tokenizer) matches
		// nothing, not every document.
		return func(map[string]*qdrant.Value) bool { return false }
	}
	return func(p map[string]*qdrant.Value) bool {
		for _, v := range valuesAt(p, idx.path) {
			vals := []*qdrant.Value{v}
			if l := v.GetListValue(); l != nil {
				vals = l.GetValues()
			}
			for _, x := range vals {
				if s, ok := str(x); ok && test(idx.tokens(s), q) {
					return true
				}
			}
		}
		return false
	}
}

// tokens splits s as the index's tokenizer does.
func (idx *fieldIndex) tokens(s string) []string {
	split := func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsNumber(r) }
	if idx.text.GetTokenizer() == qdrant.TokenizerType_Whitespace {
		split = unicode.IsSpace
	}
	toks := strings.FieldsFunc(s, split)
	if idx.text == nil || idx.text.Lowercase == nil || *idx.text.Lowercase {
		for i, t := range toks {
			toks[i] = strings.ToLower(t)
		}
	}
	return toks
}
