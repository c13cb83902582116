package rows

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"

	"github.com/parquet-go/parquet-go"
)

// erasure is the policy of row erasure: it drops the rows that belong to the subject and
// keeps every other row as it is.
type erasure struct{ dropped int }

func (e *erasure) decide(matched bool) action {
	if matched {
		e.dropped++
		return drop
	}
	return keep
}

func (e *erasure) csvRow(_ *csvRecord, matched bool) (action, []byte) { return e.decide(matched), nil }

func (e *erasure) jsonRow(_ []byte, matched bool) (action, []byte) { return e.decide(matched), nil }

func (e *erasure) parquetRow(_ parquet.Row, _ *parquetColumns, matched bool) action {
	return e.decide(matched)
}

// Rewrite copies the dataset object key, read from body, to w without the rows m matches
// and returns how many rows it dropped; with a nil w it only counts. Compression is
// settled by content and kept, the format by the extension and content; kept rows are
// copied byte for byte (CSV, TSV, JSONL, JSON arrays; their decompressed bytes when
// gzip-compressed) or value for value (Parquet). Content that cannot be decoded or passes
// lim wraps ErrMalformed; a failure to read body or to write w is returned as it is.
// Either way w holds partial output that the caller must discard.
func Rewrite(key string, body io.Reader, w io.Writer, m *Match, lim Limits) (int, error) {
	var e erasure
	err := walk(key, body, w, m, &e, lim)
	return e.dropped, err
}

func matchCSV(fields []string, subj, sess []int, m *Match) bool {
	for _, i := range subj {
		if m.Subject(fields[i]) {
			return true
		}
	}
	for _, i := range sess {
		if m.Session(fields[i]) {
			return true
		}
	}
	return false
}

var errNotObject = errors.New("not a json object")

// matchJSONL reports whether one JSONL line belongs to the subject. A blank line matches
// nothing; anything else must be exactly one JSON object. Errors say where, never what.
func matchJSONL(line []byte, m *Match) (bool, error) {
	if len(bytes.TrimSpace(line)) == 0 {
		return false, nil
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	match, err := matchObject(dec, m)
	if err != nil {
		return false, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return false, errNotObject // trailing data after the object
	}
	return match, nil
}

// matchObject reads one JSON object from dec and reports whether it belongs to the
// subject. A column matches when it holds a matching string, a number whose literal is the
// identifier, or an array with such an element; every occurrence of a duplicated key is
// checked. A column naming a dotted path (metadata.customer_id) also matches the field
// customer_id of the object under metadata, at any depth.
func matchObject(dec *json.Decoder, m *Match) (bool, error) {
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return false, errNotObject
	}
	match := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return false, errNotObject
		}
		key, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return false, errNotObject
		}
		if !match {
			match = pathMatch(m.SubjectCols, key, raw, m.Subject) || pathMatch(m.SessionCols, key, raw, m.Session)
		}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return false, errNotObject
	}
	return match, nil
}

// pathMatch reports whether one of cols names the field key and its value raw holds a
// value eq accepts, or names a path below key whose field does.
func pathMatch(cols []string, key string, raw json.RawMessage, eq func(string) bool) bool {
	for _, c := range cols {
		if c == key {
			if anyValue(raw, eq) {
				return true
			}
			continue
		}
		if rest, ok := strings.CutPrefix(c, key+"."); ok && nestedMatch(raw, rest, eq) {
			return true
		}
	}
	return false
}

// nestedMatch reports whether raw is an object whose path col holds a value eq accepts.
// raw was already decoded once, so it is valid JSON.
func nestedMatch(raw json.RawMessage, col string, eq func(string) bool) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if _, err := dec.Token(); err != nil {
		return false
	}
	cols := []string{col}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return false
		}
		if pathMatch(cols, key, v, eq) {
			return true
		}
	}
	return false
}

// anyValue reports whether raw, a string, a number or an array of them, holds a value eq
// accepts. An array is walked one element at a time, never decoded whole.
func anyValue(raw json.RawMessage, eq func(string) bool) bool {
	if v, ok := scalar(raw); ok {
		return eq(v)
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '[' {
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return false
	}
	for dec.More() {
		var e json.RawMessage
		if dec.Decode(&e) != nil {
			return false
		}
		if v, ok := scalar(e); ok && eq(v) {
			return true
		}
	}
	return false
}

func scalar(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "", false
	}
	switch c := raw[0]; {
	case c == '"':
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err == nil
	case c == '-' || c >= '0' && c <= '9':
		return string(raw), true
	}
	return "", false
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
