package datasetstore

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/parquet-go/parquet-go"
)

// matcher decides whether a row belongs to the subject. Values are compared exactly after
// decoding: no substring, no case folding, no normalisation. Empty identifiers match
// nothing.
type matcher struct {
	subjectCols []string
	sessionCols []string
	id          string
	sessions    map[string]bool
	batch       *batchHits // set for a matcher of many subjects (batch.go)
	collect     *collector // set for a matcher that gathers every value to summarise it
	ix          *indexer   // set for a matcher whose questions a CSV filter records (rowindex.go)
}

func newMatcher(subjectCols, sessionCols []string, id string, sessions []string) *matcher {
	m := &matcher{subjectCols: subjectCols, sessionCols: sessionCols, id: id, sessions: map[string]bool{}}
	for _, s := range sessions {
		if s != "" {
			m.sessions[s] = true
		}
	}
	return m
}

// empty reports whether m can match nothing at all.
func (m *matcher) empty() bool {
	if m.batch != nil {
		return m.batch.empty(m)
	}
	return (m.id == "" || len(m.subjectCols) == 0) && (len(m.sessions) == 0 || len(m.sessionCols) == 0)
}

func (m *matcher) subject(v string) bool {
	if m.collect != nil {
		m.collect.add(m.collect.ids, v)
		return false
	}
	if m.ix != nil {
		m.ix.ask(false, v)
	}
	if m.batch != nil {
		return m.batch.hit(m.batch.ids, v)
	}
	return m.id != "" && v == m.id
}

func (m *matcher) session(v string) bool {
	if m.collect != nil {
		m.collect.add(m.collect.sessions, v)
		return false
	}
	if m.ix != nil {
		m.ix.ask(true, v)
	}
	if m.batch != nil {
		return m.batch.hit(m.batch.sessions, v)
	}
	return v != "" && m.sessions[v]
}

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
func (e *erasure) jsonRow(_ []byte, matched bool) (action, []byte)    { return e.decide(matched), nil }
func (e *erasure) parquetRow(_ parquet.Row, _ *parquetColumns, matched bool) action {
	return e.decide(matched)
}

// rewrite copies the dataset object key, read from body, to w without the rows m matches
// and returns how many rows it dropped; with a nil w it only counts. It reads and fails as
// walk does.
func rewrite(key string, body io.Reader, w io.Writer, m *matcher, lim Limits) (int, error) {
	var e erasure
	err := walk(key, body, w, m, &e, lim)
	return e.dropped, err
}

// filter is rewrite of the decompressed dataset r of format f.
func filter(f format, r io.Reader, w io.Writer, m *matcher, lim Limits) (int, error) {
	var e erasure
	err := walkFormat(f, r, w, m, &e, lim)
	return e.dropped, err
}

// maxFields bounds the fields of one CSV or TSV record (a parser holds about 40 bytes per
// field, whatever its length).
const maxFields = 1 << 16

// readAhead bounds one Read of a recorder: what its parser reads past a record.
const readAhead = 4 << 10

// recorder keeps the bytes read through it until they are taken, so the raw bytes of each
// CSV record (JSON array element) can be copied out after the parser read them. It holds
// one record and what its parser read ahead (at most readAhead). Once it holds more than
// lim.Record bytes besides, or a CSV record more than maxFields separators, its Read fails
// with a boundError, so that the parser above it never holds more either: this is the
// record bound of the filter, the mention scanner and the summary builder alike.
type recorder struct {
	src   io.Reader
	lim   Limits
	what  string // what one record is, for the bound's error
	sep   byte   // the CSV separator whose count is bounded (0: none)
	seps  int    // separators in buf
	buf   []byte // the bytes read and not taken yet
	array []byte // what buf lies in, from its start
	base  int64  // input offset of buf[0]
	err   error  // the first read error other than io.EOF, or the bound passed
}

func newRecorder(src io.Reader, lim Limits, what string, sep byte) *recorder {
	return &recorder{src: src, lim: lim, what: what, sep: sep}
}

func (r *recorder) Read(p []byte) (int, error) {
	if r.err != nil && isBound(r.err) {
		return 0, r.err
	}
	p = p[:min(len(p), readAhead)]
	n, err := r.src.Read(p)
	if len(r.buf)+n > cap(r.buf) {
		// buf reached the end of its array: move it to the array's start when it fits
		// there (what was taken before is no longer valid), else to a larger array
		if len(r.buf)+n > len(r.array) {
			r.array = make([]byte, 2*(len(r.buf)+n))
		}
		r.buf = r.array[:copy(r.array, r.buf)]
	}
	r.buf = append(r.buf, p[:n]...)
	if r.sep != 0 {
		r.seps += bytes.Count(p[:n], []byte{r.sep})
	}
	if err != nil && err != io.EOF && r.err == nil {
		r.err = err
	}
	switch {
	case r.err != nil:
	case int64(len(r.buf)) > r.lim.Record+readAhead:
		r.err = overRecord(r.what, r.lim)
	case r.seps > maxFields+readAhead:
		r.err = &boundError{what: r.what, bound: fmt.Sprintf("%d fields per record", maxFields)}
	}
	if r.err != nil && isBound(r.err) {
		return n, r.err
	}
	return n, err
}

// take returns the recorded bytes up to input offset end and forgets them. The slice is
// valid until the next Read.
func (r *recorder) take(end int64) []byte {
	k := int(end - r.base)
	out := r.buf[:k]
	r.buf = r.buf[k:]
	r.base = end
	if r.sep != 0 {
		r.seps -= bytes.Count(out, []byte{r.sep})
	}
	return out
}

// rest takes every recorded byte.
func (r *recorder) rest() []byte { return r.take(r.base + int64(len(r.buf))) }

// failed is the error to return for a parser that failed over r: the bound passed, or
// the source's read error; nil when r saw neither (the content is at fault).
func (r *recorder) failed() error {
	switch {
	case r.err == nil:
		return nil
	case errors.Is(r.err, errMalformed):
		return r.err
	}
	return fmt.Errorf("read: %w", r.err)
}

func matchCSV(fields []string, subj, sess []int, m *matcher) bool {
	for _, i := range subj {
		if m.subject(fields[i]) {
			return true
		}
	}
	for _, i := range sess {
		if m.session(fields[i]) {
			return true
		}
	}
	return false
}

// readLine reads line lineNo of br, its '\n' included, into line[:0]. A line of more than
// lim.Record bytes is a boundError, read no further: this is the line bound of the filter,
// the mention scanner and discovery alike. At the end it returns io.EOF with the last line
// (possibly empty); a read error is returned as "read: ...".
func readLine(br *bufio.Reader, line []byte, lineNo int, lim Limits) ([]byte, error) {
	line = line[:0]
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if int64(len(line)) > lim.Record {
			return line, overRecord(fmt.Sprintf("line %d", lineNo), lim)
		}
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == nil || err == io.EOF:
			return line, err
		case errors.Is(err, errMalformed):
			return line, err
		}
		return line, fmt.Errorf("read: %w", err)
	}
}

var errNotObject = errors.New("not a json object")

// matchJSONL reports whether one JSONL line belongs to the subject. A blank line matches
// nothing; anything else must be exactly one JSON object. Errors say where, never what.
func matchJSONL(line []byte, m *matcher) (bool, error) {
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
func matchObject(dec *json.Decoder, m *matcher) (bool, error) {
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
			match = pathMatch(m.subjectCols, key, raw, m.subject) || pathMatch(m.sessionCols, key, raw, m.session)
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
