package rows

import (
	"io"
	"strconv"

	"github.com/parquet-go/parquet-go"
	pqformat "github.com/parquet-go/parquet-go/format"
)

// matchParquet reports whether a row belongs to the subject: a value of one of its subject
// (session) columns is a string or an integer equal to the identifier (a session id).
func matchParquet(row parquet.Row, subj, sess map[int]bool, m *Match) bool {
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
		if subj[c] && m.Subject(s) || sess[c] && m.Session(s) {
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
