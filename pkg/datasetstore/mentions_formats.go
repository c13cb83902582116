package datasetstore

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/parquet-go/parquet-go"
)

// csv applies the policy to a CSV or TSV dataset, copying the header, the rows without a
// mention and whatever follows the last row byte for byte.
func (s *scanner) csv(src io.Reader, w io.Writer, comma rune) error {
	bw := newWriter(w)
	defer releaseWriter(bw)
	rec := newRecorder(src, s.lim, "a record", byte(comma))
	cr := csv.NewReader(rec)
	cr.Comma = comma
	cr.FieldsPerRecord = 0
	cr.ReuseRecord = true // a record's fields are used before the next Read, never kept
	wrap := func(err error) error {
		if ferr := rec.failed(); ferr != nil {
			return ferr
		}
		return fmt.Errorf("%w: %w", errMalformed, err)
	}
	header, err := cr.Read()
	if err == io.EOF {
		return nil
	}
	if err != nil {
		return wrap(err)
	}
	header = slices.Clone(header)
	header[0] = strings.TrimPrefix(header[0], "\ufeff")
	var subj, sess []int
	for i, name := range header {
		if contains(s.m.subjectCols, name) {
			subj = append(subj, i)
		}
		if contains(s.m.sessionCols, name) {
			sess = append(sess, i)
		}
	}
	if _, err := bw.Write(rec.take(cr.InputOffset())); err != nil {
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
		raw := rec.take(cr.InputOffset())
		out := raw
		if !matchCSV(fields, subj, sess, s.m) {
			out = s.csvRow(raw, fields, header, comma, append(subj, sess...))
		}
		if _, err := bw.Write(out); err != nil {
			return err
		}
	}
	if err := rec.failed(); err != nil {
		return err
	}
	if _, err := bw.Write(rec.take(rec.base + int64(len(rec.buf)))); err != nil {
		return err
	}
	return bw.Flush()
}

// csvRow applies the policy to one CSV record (raw, parsed as fields) outside its named
// columns and returns what to write. A redacted row is edited in its raw bytes when that
// parses back to the redacted cells, and re-encoded otherwise.
func (s *scanner) csvRow(raw []byte, fields, header []string, comma rune, named []int) []byte {
	var red []string // the fields redacted, once one is
	found := false
	for i, v := range fields {
		if slices.Contains(named, i) {
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
	switch s.decide(found) {
	case rowKeep:
		return raw
	case rowDrop:
		return nil
	}
	if edited := []byte(s.f.redact(string(raw))); slices.Equal(parseCSVRecord(edited, comma), red) {
		return edited
	}
	var b bytes.Buffer
	cw := csv.NewWriter(&b)
	cw.Comma = comma
	cw.UseCRLF = bytes.HasSuffix(raw, []byte("\r\n"))
	_ = cw.Write(red)
	cw.Flush()
	if !bytes.HasSuffix(raw, []byte("\n")) {
		return bytes.TrimRight(b.Bytes(), "\r\n")
	}
	return b.Bytes()
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

// jsonl applies the policy to a JSONL dataset, line by line.
func (s *scanner) jsonl(src io.Reader, w io.Writer) error {
	bw := newWriter(w)
	defer releaseWriter(bw)
	br := newReader(src)
	defer releaseReader(br)
	var line []byte
	for lineNo := 1; ; lineNo++ {
		var err error
		line, err = readLine(br, line, lineNo, s.lim)
		if err != nil && err != io.EOF {
			return err
		}
		if len(line) > 0 {
			match, perr := matchJSONL(line, s.m)
			if perr != nil {
				return fmt.Errorf("%w: line %d: %w", errMalformed, lineNo, perr)
			}
			out := line
			if !match {
				body := bytes.TrimRight(line, "\r\n")
				if out = s.jsonRow(body); out != nil {
					out = append(out, line[len(body):]...)
				}
			}
			if _, werr := bw.Write(out); werr != nil {
				return werr
			}
		}
		if err == io.EOF {
			return bw.Flush()
		}
	}
}

// jsonArray applies the policy to a JSON array of objects, element by element, keeping
// the layout as filterJSONArray does.
func (s *scanner) jsonArray(src io.Reader, w io.Writer) error {
	bw := newWriter(w)
	defer releaseWriter(bw)
	rec := newRecorder(src, s.lim, "an array element", 0)
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
	if _, err := bw.Write(rec.take(dec.InputOffset())); err != nil {
		return err
	}
	kept := 0
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
		match, err := matchObject(ed, s.m)
		if err != nil {
			return bad("element %d: %v", i, err)
		}
		out := []byte(raw)
		if !match {
			out = s.jsonRow(raw)
		}
		if out == nil {
			continue
		}
		sep := chunk[:len(chunk)-len(raw)]
		if kept == 0 && i > 1 {
			sep = bytes.Replace(sep, []byte(","), nil, 1)
		}
		if _, err := bw.Write(sep); err != nil {
			return err
		}
		if _, err := bw.Write(out); err != nil {
			return err
		}
		kept++
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim(']') {
		return bad("unterminated json array")
	}
	if _, err := bw.Write(rec.take(dec.InputOffset())); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return bad("data after the json array")
	}
	if _, err := bw.Write(rec.take(rec.base + int64(len(rec.buf)))); err != nil {
		return err
	}
	return bw.Flush()
}

// parquet applies the policy to a Parquet dataset (opened as filterParquet opens it):
// every byte-array value is looked at; a redacted row is written value for value with the
// mention replaced.
func (s *scanner) parquet(r io.Reader, w io.Writer) (err error) {
	defer recovered(&err)
	f, err := openParquet(r, s.lim)
	if err != nil {
		return err
	}
	schema := f.Schema()
	names := []string{}
	subj, sess := map[int]bool{}, map[int]bool{}
	for i, p := range schema.Columns() {
		name := strings.Join(p, ".")
		names = append(names, name)
		subj[i] = contains(s.m.subjectCols, name)
		sess[i] = contains(s.m.sessionCols, name)
	}
	var pw *parquet.Writer
	if s.write {
		pw = parquetWriter(f, w)
	}
	buf := make([]parquet.Row, 256)
	for g, rg := range f.RowGroups() {
		rows := rg.Rows()
		for {
			n, err := rows.ReadRows(buf)
			for _, row := range buf[:n] {
				if !matchParquet(row, subj, sess, s.m) && !s.parquetRow(row, names, subj, sess) {
					continue
				}
				if pw != nil {
					if _, err := pw.WriteRows([]parquet.Row{row}); err != nil {
						rows.Close()
						return fmt.Errorf("parquet rewrite: %w", err)
					}
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

// parquetRow applies the policy to one Parquet row in place and reports whether to keep it.
func (s *scanner) parquetRow(row parquet.Row, names []string, subj, sess map[int]bool) bool {
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
		if s.write && s.policy == MentionsRedact && v.Kind() == parquet.ByteArray {
			row[i] = parquet.ByteArrayValue([]byte(red)).Level(v.RepetitionLevel(), v.DefinitionLevel(), v.Column())
		}
	}
	switch s.decide(found) {
	case rowKeep:
		return true
	case rowDrop:
		return false
	}
	for _, v := range row {
		if !subj[v.Column()] && !sess[v.Column()] && !v.IsNull() && v.Kind() == parquet.FixedLenByteArray && s.f.in(string(v.ByteArray())) {
			s.ms.left++ // a fixed-length value cannot take the token
			break
		}
	}
	return true
}
