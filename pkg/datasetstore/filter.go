package datasetstore

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
)

// format is a dataset file format.
type format int

const (
	formatCSV   format = iota + 1 // CSV with a header row
	formatJSONL                   // one JSON object per line
)

// formatOf returns the format of a dataset object by its extension (case-insensitive), or
// false for an object that is no dataset.
func formatOf(key string) (format, bool) {
	switch strings.ToLower(path.Ext(key)) {
	case ".csv":
		return formatCSV, true
	case ".jsonl":
		return formatJSONL, true
	}
	return 0, false
}

// errMalformed marks content that cannot be parsed; the object is left as it is.
var errMalformed = errors.New("malformed dataset")

// matcher decides whether a row belongs to the subject. Values are compared exactly after
// decoding: no substring, no case folding, no normalisation. Empty identifiers match
// nothing.
type matcher struct {
	subjectCols []string
	sessionCols []string
	id          string
	sessions    map[string]bool
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
	return (m.id == "" || len(m.subjectCols) == 0) && (len(m.sessions) == 0 || len(m.sessionCols) == 0)
}

func (m *matcher) subject(v string) bool { return m.id != "" && v == m.id }
func (m *matcher) session(v string) bool { return v != "" && m.sessions[v] }

// filter copies the dataset in r to w without the rows m matches and returns how many rows
// it dropped. Every kept row, the header and any blank lines are copied byte for byte. With
// a nil w it only counts. A parse error wraps errMalformed; a read error is returned as is.
// Both leave w with partial output that the caller must discard.
func filter(f format, r io.Reader, w io.Writer, m *matcher) (int, error) {
	if w == nil {
		w = io.Discard
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	var n int
	var err error
	switch f {
	case formatCSV:
		n, err = filterCSV(r, bw, m)
	case formatJSONL:
		n, err = filterJSONL(r, bw, m)
	default:
		return 0, fmt.Errorf("%w: unknown format", errMalformed)
	}
	if err != nil {
		return n, err
	}
	return n, bw.Flush()
}

// recorder keeps the bytes read through it until they are taken, so the raw bytes of each
// CSV record can be copied out after csv.Reader parsed them. It holds at most the reader's
// look-ahead plus one record.
type recorder struct {
	src  io.Reader
	buf  []byte
	base int64 // input offset of buf[0]
	err  error // the first read error other than io.EOF
}

func (r *recorder) Read(p []byte) (int, error) {
	n, err := r.src.Read(p)
	r.buf = append(r.buf, p[:n]...)
	if err != nil && err != io.EOF && r.err == nil {
		r.err = err
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
	return out
}

func filterCSV(src io.Reader, w *bufio.Writer, m *matcher) (int, error) {
	rec := &recorder{src: src}
	cr := csv.NewReader(rec)
	cr.FieldsPerRecord = 0 // every record has as many fields as the header
	cr.ReuseRecord = true
	wrap := func(err error) error {
		if rec.err != nil {
			return fmt.Errorf("read: %w", rec.err)
		}
		return fmt.Errorf("%w: %w", errMalformed, err)
	}
	header, err := cr.Read()
	if err == io.EOF {
		_, err = w.Write(rec.take(rec.base + int64(len(rec.buf))))
		return 0, err
	}
	if err != nil {
		return 0, wrap(err)
	}
	var subj, sess []int
	for i, name := range header {
		if i == 0 {
			name = strings.TrimPrefix(name, "\ufeff")
		}
		if contains(m.subjectCols, name) {
			subj = append(subj, i)
		}
		if contains(m.sessionCols, name) {
			sess = append(sess, i)
		}
	}
	if _, err := w.Write(rec.take(cr.InputOffset())); err != nil {
		return 0, err
	}
	dropped := 0
	for {
		fields, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return dropped, wrap(err)
		}
		raw := rec.take(cr.InputOffset())
		if matchCSV(fields, subj, sess, m) {
			dropped++
			continue
		}
		if _, err := w.Write(raw); err != nil {
			return dropped, err
		}
	}
	if rec.err != nil {
		return dropped, fmt.Errorf("read: %w", rec.err)
	}
	// Whatever follows the last record (blank lines) is kept.
	_, err = w.Write(rec.take(rec.base + int64(len(rec.buf))))
	return dropped, err
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

func filterJSONL(src io.Reader, w *bufio.Writer, m *matcher) (int, error) {
	br := bufio.NewReaderSize(src, 64<<10)
	var line []byte
	dropped, lineNo := 0, 0
	for {
		line = line[:0]
		var err error
		for {
			var chunk []byte
			chunk, err = br.ReadSlice('\n')
			line = append(line, chunk...)
			if err != bufio.ErrBufferFull {
				break
			}
		}
		if err != nil && err != io.EOF {
			return dropped, fmt.Errorf("read: %w", err)
		}
		if len(line) > 0 {
			lineNo++
			match, perr := matchJSONL(line, m)
			if perr != nil {
				return dropped, fmt.Errorf("%w: line %d: %w", errMalformed, lineNo, perr)
			}
			if match {
				dropped++
			} else if _, werr := w.Write(line); werr != nil {
				return dropped, werr
			}
		}
		if err == io.EOF {
			return dropped, nil
		}
	}
}

var errNotObject = errors.New("not a json object")

// matchJSONL reports whether one JSONL line belongs to the subject. A blank line matches
// nothing; anything else must be exactly one JSON object. A column matches when it holds a
// matching string, a number whose literal is the identifier, or an array with such an
// element; every occurrence of a duplicated key is checked. Errors say where, never what.
func matchJSONL(line []byte, m *matcher) (bool, error) {
	if len(bytes.TrimSpace(line)) == 0 {
		return false, nil
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
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
		if !match && contains(m.subjectCols, key) {
			match = anyValue(raw, m.subject)
		}
		if !match && contains(m.sessionCols, key) {
			match = anyValue(raw, m.session)
		}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return false, errNotObject
	}
	if _, err := dec.Token(); err != io.EOF {
		return false, errNotObject // trailing data after the object
	}
	return match, nil
}

// anyValue reports whether raw, a string, a number or an array of them, holds a value eq
// accepts.
func anyValue(raw json.RawMessage, eq func(string) bool) bool {
	if v, ok := scalar(raw); ok {
		return eq(v)
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		return false
	}
	for _, e := range list {
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
