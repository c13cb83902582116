// Package qdrantkey checks payload keys against Qdrant's JSON path grammar
// (lib/segment/src/json_path/parse.rs in Qdrant 1.17–1.19), so that an inventory naming
// a field Qdrant would refuse fails when it is loaded instead of at the first erasure.
package qdrantkey

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Check returns nil when path is a payload key Qdrant accepts: a first key, then any
// number of ".key", "[n]" and "[]" items, where a key is raw — one or more letters,
// digits, '_' or '-' — or double-quoted, holding anything but '"' and '\'. Otherwise it
// says where the path breaks the grammar.
func Check(path string) error {
	_, err := Parse(path)
	return err
}

// Item is one step of a parsed path: a key, or an array index (Index >= 0), or every
// element of an array (Index < 0, written "[]").
type Item struct {
	Key   string
	IsKey bool
	Index int
}

// Parse splits path into its items, or returns Check's error.
func Parse(path string) ([]Item, error) {
	var out []Item
	i := 0
	key := func() error {
		if i < len(path) && path[i] == '"' {
			j := strings.IndexAny(path[i+1:], "\"\\")
			if j < 0 || path[i+1+j] != '"' {
				return fmt.Errorf("qdrant payload key %q: unterminated quoted key at byte %d (a quoted key may not hold '\"' or '\\')", path, i)
			}
			out = append(out, Item{Key: path[i+1 : i+1+j], IsKey: true})
			i += j + 2
			return nil
		}
		j := i
		for j < len(path) {
			r, n := utf8.DecodeRuneInString(path[j:])
			if !unicode.IsLetter(r) && !unicode.IsNumber(r) && r != '_' && r != '-' {
				break
			}
			j += n
		}
		if j == i {
			return fmt.Errorf("qdrant payload key %q: expected a key at byte %d (letters, digits, '_' and '-', or a double-quoted key)", path, i)
		}
		out = append(out, Item{Key: path[i:j], IsKey: true})
		i = j
		return nil
	}
	if err := key(); err != nil {
		return nil, err
	}
	for i < len(path) {
		switch path[i] {
		case '.':
			i++
			if err := key(); err != nil {
				return nil, err
			}
		case '[':
			j := strings.IndexByte(path[i:], ']')
			if j < 0 {
				return nil, fmt.Errorf("qdrant payload key %q: unclosed '[' at byte %d", path, i)
			}
			inner, n := path[i+1:i+j], -1
			if inner != "" {
				n = 0
				for _, c := range inner {
					if c < '0' || c > '9' || n > (1<<31)/10 {
						return nil, fmt.Errorf("qdrant payload key %q: array index %q is not a number", path, inner)
					}
					n = n*10 + int(c-'0')
				}
			}
			out = append(out, Item{Index: n})
			i += j + 1
		default:
			return nil, fmt.Errorf("qdrant payload key %q: unexpected %q at byte %d (quote keys holding it)", path, path[i], i)
		}
	}
	return out, nil
}
