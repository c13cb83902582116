package rows

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"io"
	"slices"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/parquet-go/parquet-go"
)

// RedactionToken replaces a redacted mention.
const RedactionToken = "[erased]"

// minSubstring is the shortest identifier looked for inside a longer string.
const minSubstring = 4

// Finder finds the raw identifiers of one subject in strings, by the mention rule: an
// identifier of at least minSubstring bytes is mentioned where it occurs delimited
// (bounded), a shorter one only where a whole string equals it. A Finder with Collect set
// finds nothing and passes every string it is asked about to Collect.
type Finder struct {
	IDs     []string // longest first
	Collect func(string)
}

// NewFinder returns the Finder of the identifiers ids; empty ones are left out.
func NewFinder(ids ...string) *Finder {
	f := &Finder{}
	for _, id := range ids {
		if id != "" && !slices.Contains(f.IDs, id) {
			f.IDs = append(f.IDs, id)
		}
	}
	// Longest first, so that an identifier containing another is redacted whole.
	sort.SliceStable(f.IDs, func(i, j int) bool { return len(f.IDs[i]) > len(f.IDs[j]) })
	return f
}

// bounded reports whether the n bytes at i in s are delimited: preceded by the start,
// white space or one of " ' ( [ { < , ; =, and followed by the end, white space, one of
// " ' ) ] } > , ; or a final . : ! ? that itself ends s or precedes white space.
func bounded(s string, i, n int) bool {
	if i > 0 {
		r, _ := utf8.DecodeLastRuneInString(s[:i])
		if !unicode.IsSpace(r) && !strings.ContainsRune(`"'([{<,;=`, r) {
			return false
		}
	}
	if e := i + n; e < len(s) {
		r, size := utf8.DecodeRuneInString(s[e:])
		switch {
		case unicode.IsSpace(r) || strings.ContainsRune(`"')]}>,;`, r):
		case strings.ContainsRune(".:!?", r):
			if e+size < len(s) {
				if next, _ := utf8.DecodeRuneInString(s[e+size:]); !unicode.IsSpace(next) {
					return false
				}
			}
		default:
			return false
		}
	}
	return true
}

// in reports whether s mentions one of f's identifiers.
func (f *Finder) in(s string) bool { return f.redact(s) != s }

// redact returns s with every mention replaced by RedactionToken.
func (f *Finder) redact(s string) string {
	if f.Collect != nil {
		f.Collect(s)
		return s
	}
	for _, id := range f.IDs {
		if len(id) < minSubstring {
			if s == id {
				return RedactionToken
			}
			continue
		}
		var b strings.Builder
		rest, off := s, 0
		for {
			i := strings.Index(rest[off:], id)
			if i < 0 {
				break
			}
			i += off
			if bounded(rest, i, len(id)) {
				b.WriteString(rest[:i])
				b.WriteString(RedactionToken)
				rest, off = rest[i+len(id):], 0
				continue
			}
			off = i + 1
		}
		if b.Len() > 0 {
			b.WriteString(rest)
			s = b.String()
		}
	}
	return s
}

// MentionScan is what scanning one object for mentions found or did.
type MentionScan struct {
	Left    int      // rows still holding a mention (when only counting: every such row)
	Handled int      // rows redacted or erased
	Fields  []string // names of the columns or fields holding a mention, no values
}

func (ms *MentionScan) field(name string) {
	if !slices.Contains(ms.Fields, name) && len(ms.Fields) < 8 {
		ms.Fields = append(ms.Fields, name)
	}
}

// Mentions reads the dataset key from body and, with a nil w, counts its rows that mention
// f's identifiers outside m's columns; with a w, it writes the object to w with each such
// row redacted (every mention replaced by RedactionToken) or, with erase, dropped. Rows m
// matches are the subject's own and are left to the row erasure. It reads and fails as
// Rewrite does.
func Mentions(key string, body io.Reader, w io.Writer, m *Match, f *Finder, erase bool, lim Limits) (MentionScan, error) {
	var ms MentionScan
	s := &scanner{m: m, f: f, erase: erase, write: w != nil, ms: &ms}
	err := walk(key, body, w, m, s, lim)
	return ms, err
}

// scanner applies a mention policy row by row.
type scanner struct {
	m     *Match
	f     *Finder
	erase bool // a handled row is dropped (else redacted)
	write bool // rewriting (else only counting)
	ms    *MentionScan
}

// decide counts a row that does (found) or does not mention the subject and says what the
// policy does with it: a counted row is left, a handled one dropped or redacted.
func (s *scanner) decide(found bool) action {
	switch {
	case !found:
		return keep
	case !s.write:
		s.ms.Left++
		return keep
	}
	s.ms.Handled++
	if s.erase {
		return drop
	}
	return redact
}

// jsonStrings walks every string literal of the JSON value raw (valid JSON) outside the
// Match's named columns, reporting the field path of each mention to note, and returns
// raw with each mention redacted when redact is set (every other byte kept) and whether a
// mention was found. Arrays are transparent: their elements have the path of the array.
func (s *scanner) jsonStrings(raw []byte, redact bool, note func(string)) ([]byte, bool) {
	type frame struct {
		obj bool
		key string
	}
	var stack []frame
	var out []byte
	if redact {
		out = make([]byte, 0, len(raw))
	}
	found, last := false, 0
	for i := 0; i < len(raw); i++ {
		switch raw[i] {
		case '{':
			stack = append(stack, frame{obj: true})
			continue
		case '[':
			stack = append(stack, frame{})
			continue
		case '}', ']':
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
			continue
		case '"':
		default:
			continue
		}
		j := i + 1
		for j < len(raw) && raw[j] != '"' {
			if raw[j] == '\\' {
				j++
			}
			j++
		}
		lit := raw[i:min(j+1, len(raw))]
		i = j
		var v string
		if json.Unmarshal(lit, &v) != nil {
			continue
		}
		isKey := len(stack) > 0 && stack[len(stack)-1].obj && bytes.HasPrefix(bytes.TrimLeft(raw[j+1:], " \t\r\n"), []byte(":"))
		var where string
		if isKey {
			stack[len(stack)-1].key = v
			where = "a field name"
		} else {
			var keys []string
			for _, f := range stack {
				if f.obj {
					keys = append(keys, f.key)
				}
			}
			where = strings.Join(keys, ".")
			if contains(s.m.SubjectCols, where) || contains(s.m.SessionCols, where) {
				continue // matched exactly by the row erasure
			}
			if where == "" || s.f.in(where) {
				where = "a value"
			}
		}
		if !s.f.in(v) {
			continue
		}
		found = true
		note(where)
		if redact {
			enc, _ := marshalString(s.f.redact(v))
			out = append(append(out, raw[last:i-len(lit)+1]...), enc...)
			last = j + 1
		}
	}
	if !redact {
		return raw, found
	}
	return append(out, raw[min(last, len(raw)):]...), found
}

// marshalString encodes v as a JSON string without HTML escaping.
func marshalString(v string) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	err := enc.Encode(v)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), err
}

// jsonRow applies the policy to one JSON row raw (valid JSON) outside the Match's named
// columns; a row that belongs to the subject is left to the row erasure.
func (s *scanner) jsonRow(raw []byte, matched bool) (action, []byte) {
	if matched {
		return keep, nil
	}
	_, found := s.jsonStrings(raw, false, s.ms.field)
	act := s.decide(found)
	if act != redact {
		return act, nil
	}
	out, _ := s.jsonStrings(raw, true, func(string) {})
	if _, still := s.jsonStrings(out, false, func(string) {}); still {
		s.ms.Left++
	}
	return redact, out
}

// csvRow applies the policy to one CSV record outside its named columns; a row that
// belongs to the subject is left to the row erasure. A redacted row is edited in its raw
// bytes when that parses back to the redacted cells, and re-encoded otherwise.
func (s *scanner) csvRow(r *csvRecord, matched bool) (action, []byte) {
	if matched {
		return keep, nil
	}
	raw, fields, header, comma := r.raw, r.fields, r.header, r.comma
	var red []string // the fields redacted, once one is
	found := false
	for i, v := range fields {
		if slices.Contains(r.named, i) {
			continue // matched exactly by the row erasure
		}
		if r := s.f.redact(v); r != v {
			if red == nil {
				red = slices.Clone(fields)
			}
			red[i] = r
			found = true
			if i < len(header) && !s.f.in(header[i]) {
				s.ms.field(header[i])
			} else {
				s.ms.field("a column")
			}
		}
	}
	if act := s.decide(found); act != redact {
		return act, nil
	}
	if edited := []byte(s.f.redact(string(raw))); slices.Equal(parseCSVRecord(edited, comma), red) {
		return redact, edited
	}
	var b bytes.Buffer
	cw := csv.NewWriter(&b)
	cw.Comma = comma
	cw.UseCRLF = bytes.HasSuffix(raw, []byte("\r\n"))
	_ = cw.Write(red)
	cw.Flush()
	if !bytes.HasSuffix(raw, []byte("\n")) {
		return redact, bytes.TrimRight(b.Bytes(), "\r\n")
	}
	return redact, b.Bytes()
}

// parseCSVRecord parses one record, nil when it is not exactly one.
func parseCSVRecord(b []byte, comma rune) []string {
	cr := csv.NewReader(bytes.NewReader(b))
	cr.Comma = comma
	rec, err := cr.Read()
	if err != nil {
		return nil
	}
	if _, err := cr.Read(); err != io.EOF {
		return nil
	}
	return rec
}

// parquetRow applies the policy to one Parquet row outside its named columns, redacting in
// place; a row that belongs to the subject is left to the row erasure.
func (s *scanner) parquetRow(row parquet.Row, c *parquetColumns, matched bool) action {
	if matched {
		return keep
	}
	names, subj, sess := c.names, c.subj, c.sess
	found := false
	for i, v := range row {
		if subj[v.Column()] || sess[v.Column()] || v.IsNull() || v.Kind() != parquet.ByteArray && v.Kind() != parquet.FixedLenByteArray {
			continue
		}
		str := string(v.ByteArray())
		red := s.f.redact(str)
		if red == str {
			continue
		}
		found = true
		s.ms.field(names[v.Column()])
		if s.write && !s.erase && v.Kind() == parquet.ByteArray {
			row[i] = parquet.ByteArrayValue([]byte(red)).Level(v.RepetitionLevel(), v.DefinitionLevel(), v.Column())
		}
	}
	act := s.decide(found)
	if act != redact {
		return act
	}
	for _, v := range row {
		if !subj[v.Column()] && !sess[v.Column()] && !v.IsNull() && v.Kind() == parquet.FixedLenByteArray && s.f.in(string(v.ByteArray())) {
			s.ms.Left++ // a fixed-length value cannot take the token
			break
		}
	}
	return redact
}

// IsSplit are the runes mention tokens are split at: white space and every delimiter the
// mention rule accepts on either side of an identifier.
func IsSplit(r rune) bool {
	if r < utf8.RuneSelf {
		return asciiSplit[r]
	}
	return unicode.IsSpace(r)
}

// asciiSplit is IsSplit of each ASCII rune.
var asciiSplit = func() (t [utf8.RuneSelf]bool) {
	for r := range rune(utf8.RuneSelf) {
		t[r] = unicode.IsSpace(r) || strings.ContainsRune(`"'()[]{}<>,;=`, r)
	}
	return t
}()

// MentionTokens calls fn with every string an identifier without split runes can be
// mentioned as in s (see Finder): each piece between split runes
// of at least minSubstring bytes, the piece without a final . : ! or ?, and s itself when
// it is shorter than minSubstring (a short identifier is mentioned only as a whole cell).
// The pieces are those of strings.FieldsFunc(s, IsSplit), found without allocating.
func MentionTokens(s string, fn func(string)) {
	if len(s) < minSubstring {
		fn(s)
	}
	piece := func(p string) {
		if len(p) >= minSubstring {
			fn(p)
		}
		if n := len(p) - 1; n >= minSubstring && strings.ContainsRune(".:!?", rune(p[n])) {
			fn(p[:n])
		}
	}
	start := -1 // of the piece in progress
	for i, r := range s {
		switch split := IsSplit(r); {
		case split && start >= 0:
			piece(s[start:i])
			start = -1
		case !split && start < 0:
			start = i
		}
	}
	if start >= 0 {
		piece(s[start:])
	}
}
