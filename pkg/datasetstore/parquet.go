package datasetstore

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/parquet-go/parquet-go"
	pqformat "github.com/parquet-go/parquet-go/format"
)

// filterParquet filters a Parquet file. Parquet needs random access, so the file is read
// whole and checked against lim (openParquet: a file past it is malformed, unexamined,
// never rewritten). The rewrite keeps the schema, the compression codec of the first
// column chunk and the key/value metadata, and writes every kept row value for value.
// Columns are leaf columns named by their path, so "metadata.customer_id" names the field
// customer_id of the group metadata; a repeated column matches when any of its values
// does. With a nil w it only counts.
func filterParquet(r io.Reader, w io.Writer, m *matcher, lim Limits) (dropped int, err error) {
	defer recovered(&err)
	f, err := openParquet(r, lim)
	if err != nil {
		return 0, err
	}
	schema := f.Schema()
	subj, sess := map[int]bool{}, map[int]bool{}
	for i, p := range schema.Columns() {
		name := strings.Join(p, ".")
		if contains(m.subjectCols, name) {
			subj[i] = true
		}
		if contains(m.sessionCols, name) {
			sess[i] = true
		}
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
				if matchParquet(row, subj, sess, m) {
					dropped++
					continue
				}
				if pw != nil {
					if _, err := pw.WriteRows([]parquet.Row{row}); err != nil {
						rows.Close()
						return dropped, fmt.Errorf("parquet rewrite: %w", err)
					}
				}
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				rows.Close()
				return dropped, malformed("parquet row group %d: %v", g+1, err)
			}
		}
		if err := rows.Close(); err != nil {
			return dropped, malformed("parquet row group %d: %v", g+1, err)
		}
	}
	if pw != nil {
		if err := pw.Close(); err != nil {
			return dropped, fmt.Errorf("parquet rewrite: %w", err)
		}
	}
	return dropped, nil
}

// matchParquet reports whether a row belongs to the subject: a value of one of its subject
// (session) columns is a string or an integer equal to the identifier (a session id).
func matchParquet(row parquet.Row, subj, sess map[int]bool, m *matcher) bool {
	for _, v := range row {
		c := v.Column()
		if !subj[c] && !sess[c] || v.IsNull() {
			continue
		}
		var s string
		switch v.Kind() {
		case parquet.ByteArray, parquet.FixedLenByteArray:
			s = string(v.ByteArray())
		case parquet.Int32:
			s = strconv.FormatInt(int64(v.Int32()), 10)
		case parquet.Int64:
			s = strconv.FormatInt(v.Int64(), 10)
		default:
			continue
		}
		if subj[c] && m.subject(s) || sess[c] && m.session(s) {
			return true
		}
	}
	return false
}

// parquetWriter writes a rewrite of f to w with f's schema, the compression codec of its
// first column chunk and its key/value metadata.
func parquetWriter(f *parquet.File, w io.Writer) *parquet.Writer {
	md := f.Metadata()
	codec := pqformat.Uncompressed
	if len(md.RowGroups) > 0 && len(md.RowGroups[0].Columns) > 0 {
		codec = md.RowGroups[0].Columns[0].MetaData.Codec
	}
	opts := []parquet.WriterOption{f.Schema(), parquet.Compression(parquet.LookupCompressionCodec(codec))}
	for _, kv := range md.KeyValueMetadata {
		opts = append(opts, parquet.KeyValueMetadata(kv.Key, kv.Value))
	}
	return parquet.NewWriter(w, opts...)
}
