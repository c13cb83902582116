package rows

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/parquet-go/parquet-go"
)

// action is what a policy does with one row.
type action int

const (
	keep   action = iota // the row is copied as it is
	drop                 // the row is left out
	redact               // the row is replaced by what the policy returns
)

// policy decides the fate of each row a walker reads; matched reports whether the row
// belongs to the subject (the walker's Match). Row erasure (erasure) and mention handling
// (scanner) are the two policies.
type policy interface {
	// csvRow decides one CSV or TSV record; redact returns the bytes to write instead.
	csvRow(r *csvRecord, matched bool) (action, []byte)
	// jsonRow decides one JSON object (a JSONL line without its line end, or a JSON array
	// element); redact returns the object to write instead.
	jsonRow(raw []byte, matched bool) (action, []byte)
	// parquetRow decides one Parquet row; redact writes row, which it may have edited.
	parquetRow(row parquet.Row, c *parquetColumns, matched bool) action
}

// csvRecord is one CSV or TSV record as a walker read it.
type csvRecord struct {
	raw        []byte   // its bytes, line end included
	fields     []string // its cells, valid until the next record
	header     []string // the column names (a byte order mark dropped)
	comma      rune
	subj, sess []int // the positions of the subject and session columns
	named      []int // subj and sess
}

// parquetColumns names the leaf columns of a Parquet schema.
type parquetColumns struct {
	names      []string     // per column, its dotted path
	subj, sess map[int]bool // the subject and session columns
}

// walk copies the dataset key, read from body, to w (nil: it only reads) with each row's
// fate as p decides, m telling which rows belong to the subject. Compression is settled by
// content (gzip's magic number) and kept; the format by the extension (ignoring case and a
// ".gz" suffix) and, for ".json", an unknown extension or Parquet's magic number, by
// content. Kept rows are copied byte for byte (CSV, TSV, JSONL, JSON arrays; their
// decompressed bytes when gzip-compressed) or value for value with the schema and the
// compression codec (Parquet). Content that cannot be decoded or passes lim wraps
// ErrMalformed; a failure to read body or to write w is returned as it is. Either way w
// holds partial output that the caller must discard.
func walk(key string, body io.Reader, w io.Writer, m *Match, p policy, lim Limits) error {
	return transcode(body, w, func(src io.Reader, dst *tracked) error {
		f, in, zr, release, err := open(key, src, lim)
		defer release()
		if err != nil {
			return err
		}
		var out io.Writer
		var zw *gzip.Writer
		if dst != nil {
			out = dst
			if zr != nil {
				zw = gzip.NewWriter(dst)
				zw.Header = zr.Header
				out = zw
			}
		}
		if err := walkFormat(f, in, out, m, p, lim); err != nil {
			return err
		}
		if zw != nil {
			return zw.Close()
		}
		return nil
	})
}

// walkFormat is walk of the decompressed dataset r of format f. Every kept row, the
// header, any blank lines and what follows the last row are copied byte for byte.
func walkFormat(f format, r io.Reader, w io.Writer, m *Match, p policy, lim Limits) error {
	if f == formatParquet {
		return walkParquet(r, w, m, p, lim)
	}
	if w == nil {
		w = io.Discard
	}
	bw := newWriter(w)
	defer releaseWriter(bw)
	var err error
	switch f {
	case formatCSV:
		err = walkCSV(r, bw, ',', m, p, lim)
	case formatTSV:
		err = walkCSV(r, bw, '\t', m, p, lim)
	case formatJSONL:
		err = walkJSONL(r, bw, m, p, lim)
	case formatJSONArray:
		err = walkJSONArray(r, bw, m, p, lim)
	case formatEmpty:
	default:
		return malformed("unknown format")
	}
	if err != nil {
		return err
	}
	return bw.Flush()
}

// write writes what act makes of a row whose bytes are raw: raw itself, nothing, or out.
func write(w io.Writer, act action, raw, out []byte) error {
	switch act {
	case drop:
		return nil
	case redact:
		raw = out
	}
	_, err := w.Write(raw)
	return err
}

// walkCSV walks a CSV or TSV dataset with a header row; m.Recorder, if any, is told of
// every row dropped or written.
func walkCSV(src io.Reader, w *bufio.Writer, comma rune, m *Match, p policy, lim Limits) error {
	rec := newRecorder(src, lim, "a record", byte(comma))
	cr := csv.NewReader(rec)
	cr.Comma = comma
	cr.FieldsPerRecord = 0 // every record has as many fields as the header
	cr.ReuseRecord = true  // a record's fields are used before the next Read, never kept
	wrap := func(err error) error {
		if ferr := rec.failed(); ferr != nil {
			return ferr
		}
		return fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	header, err := cr.Read()
	if err == io.EOF {
		_, err = w.Write(rec.rest())
		return err
	}
	if err != nil {
		return wrap(err)
	}
	r := &csvRecord{header: slices.Clone(header), comma: comma}
	r.header[0] = strings.TrimPrefix(r.header[0], "\ufeff")
	for i, name := range r.header {
		if contains(m.SubjectCols, name) {
			r.subj = append(r.subj, i)
		}
		if contains(m.SessionCols, name) {
			r.sess = append(r.sess, i)
		}
	}
	r.named = append(slices.Clone(r.subj), r.sess...)
	if m.Recorder != nil {
		m.Recorder.Claim()
	}
	if _, err := w.Write(rec.take(cr.InputOffset())); err != nil {
		return err
	}
	for {
		fields, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return wrap(err)
		}
		r.raw, r.fields = rec.take(cr.InputOffset()), fields
		act, out := p.csvRow(r, matchCSV(fields, r.subj, r.sess, m))
		switch {
		case m.Recorder != nil && act == drop:
			m.Recorder.Dropped(fields, r.subj, r.sess)
		case m.Recorder != nil:
			m.Recorder.Kept(fields, r.subj, r.sess)
		}
		if err := write(w, act, r.raw, out); err != nil {
			return err
		}
	}
	if err := rec.failed(); err != nil {
		return err
	}
	if m.Recorder != nil {
		m.Recorder.Done()
	}
	// Whatever follows the last record (blank lines) is kept.
	_, err = w.Write(rec.rest())
	return err
}

// walkJSONL walks a JSONL dataset line by line; blank lines are kept.
func walkJSONL(src io.Reader, w *bufio.Writer, m *Match, p policy, lim Limits) error {
	br := newReader(src)
	defer releaseReader(br)
	var line []byte
	for lineNo := 1; ; lineNo++ {
		var err error
		line, err = readLine(br, line, lineNo, lim)
		if err != nil && err != io.EOF {
			return err
		}
		if len(line) > 0 {
			match, perr := matchJSONL(line, m)
			if perr != nil {
				return fmt.Errorf("%w: line %d: %w", ErrMalformed, lineNo, perr)
			}
			body := bytes.TrimRight(line, "\r\n")
			act, out := p.jsonRow(body, match)
			if act == redact {
				out = append(out, line[len(body):]...) // the line end
			}
			if werr := write(w, act, line, out); werr != nil {
				return werr
			}
		}
		if err == io.EOF {
			return nil
		}
	}
}

// walkJSONArray walks a JSON array of objects, streaming it one element at a time (each at
// most lim.Record bytes): the bytes before, between and after the written elements are
// copied as they are, and a comma goes with the element it precedes, so dropping elements
// leaves a valid array with the original layout.
func walkJSONArray(src io.Reader, w *bufio.Writer, m *Match, p policy, lim Limits) error {
	rec := newRecorder(src, lim, "an array element", 0)
	dec := json.NewDecoder(rec)
	dec.UseNumber()
	bad := func(format string, args ...any) error {
		if err := rec.failed(); err != nil {
			return err
		}
		return malformed(format, args...)
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return bad("not a json array")
	}
	if _, err := w.Write(rec.take(dec.InputOffset())); err != nil {
		return err
	}
	written := 0
	for i := 1; dec.More(); i++ {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			if endOfInput(err) {
				return bad("unterminated json array")
			}
			return bad("element %d is not valid json", i)
		}
		chunk := rec.take(dec.InputOffset())
		ed := json.NewDecoder(bytes.NewReader(raw))
		ed.UseNumber()
		match, err := matchObject(ed, m)
		if err != nil {
			return bad("element %d: %v", i, err)
		}
		act, out := p.jsonRow(raw, match)
		if act == drop {
			continue
		}
		sep := chunk[:len(chunk)-len(raw)]
		if written == 0 && i > 1 {
			sep = bytes.Replace(sep, []byte(","), nil, 1) // it now comes first
		}
		if _, err := w.Write(sep); err != nil {
			return err
		}
		if err := write(w, act, raw, out); err != nil {
			return err
		}
		written++
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim(']') {
		return bad("unterminated json array")
	}
	if _, err := w.Write(rec.take(dec.InputOffset())); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return bad("data after the json array")
	}
	if err := rec.failed(); err != nil {
		return err
	}
	_, err := w.Write(rec.rest())
	return err
}

// endOfInput reports whether a Decode error says the input ended where a value should start.
// Since Go 1.27, encoding/json (on json/v2) has More report another element at the end of
// the input, and the Decode that follows fails with this syntax error, which has no
// sentinel to test.
func endOfInput(err error) bool {
	var se *json.SyntaxError
	return errors.As(err, &se) && se.Error() == "unexpected end of JSON input"
}

// walkParquet walks a Parquet file. Parquet needs random access, so the file is read whole
// and checked against lim (openParquet: a file past it is malformed, unexamined, never
// rewritten). The rewrite keeps the schema, the compression codec of the first column
// chunk and the key/value metadata, and writes every row kept or redacted value for value.
// Columns are leaf columns named by their path, so "metadata.customer_id" names the field
// customer_id of the group metadata; a repeated column matches when any of its values
// does.
func walkParquet(r io.Reader, w io.Writer, m *Match, p policy, lim Limits) (err error) {
	defer recovered(&err)
	f, err := openParquet(r, lim)
	if err != nil {
		return err
	}
	c := &parquetColumns{subj: map[int]bool{}, sess: map[int]bool{}}
	for i, path := range f.Schema().Columns() {
		name := strings.Join(path, ".")
		c.names = append(c.names, name)
		c.subj[i] = contains(m.SubjectCols, name)
		c.sess[i] = contains(m.SessionCols, name)
	}
	var pw *parquet.Writer
	if w != nil {
		pw = parquetWriter(f, w)
	}
	buf := make([]parquet.Row, 256)
	for g, rg := range f.RowGroups() {
		rows := rg.Rows()
		for {
			n, err := rows.ReadRows(buf)
			for _, row := range buf[:n] {
				if p.parquetRow(row, c, matchParquet(row, c.subj, c.sess, m)) == drop || pw == nil {
					continue
				}
				if _, err := pw.WriteRows([]parquet.Row{row}); err != nil {
					rows.Close()
					return fmt.Errorf("parquet rewrite: %w", err)
				}
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				rows.Close()
				return malformed("parquet row group %d: %v", g+1, err)
			}
		}
		if err := rows.Close(); err != nil {
			return malformed("parquet row group %d: %v", g+1, err)
		}
	}
	if pw != nil {
		if err := pw.Close(); err != nil {
			return fmt.Errorf("parquet rewrite: %w", err)
		}
	}
	return nil
}
