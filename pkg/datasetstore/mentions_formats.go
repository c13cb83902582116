package datasetstore

import (
	"bytes"
	"encoding/csv"
	"io"
	"slices"

	"github.com/parquet-go/parquet-go"
)

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
		if s.write && s.policy == MentionsRedact && v.Kind() == parquet.ByteArray {
			row[i] = parquet.ByteArrayValue([]byte(red)).Level(v.RepetitionLevel(), v.DefinitionLevel(), v.Column())
		}
	}
	act := s.decide(found)
	if act != redact {
		return act
	}
	for _, v := range row {
		if !subj[v.Column()] && !sess[v.Column()] && !v.IsNull() && v.Kind() == parquet.FixedLenByteArray && s.f.in(string(v.ByteArray())) {
			s.ms.left++ // a fixed-length value cannot take the token
			break
		}
	}
	return redact
}
