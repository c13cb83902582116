package datasetstore

import (
	"bytes"
	"io"
	"testing"

	"github.com/parquet-go/parquet-go"
	pqformat "github.com/parquet-go/parquet-go/format"

	"github.com/lethe-erasure/lethe/pkg/deletion"
)

// FuzzParquetBounds reads mutated Parquet files through the row filter within small
// limits: whatever the content, it must end (an error is fine) without a panic escaping
// and without the reader holding more than the limits allow.
func FuzzParquetBounds(f *testing.F) {
	all, _ := formatRows()
	for _, c := range []pqformat.CompressionCodec{pqformat.Uncompressed, pqformat.Snappy, pqformat.Gzip, pqformat.Zstd, pqformat.Lz4Raw} {
		var b bytes.Buffer
		w := parquet.NewGenericWriter[rec](&b, parquet.Compression(parquet.LookupCompressionCodec(c)))
		if _, err := w.Write(all); err != nil || w.Close() != nil {
			f.Fatal("cannot write the seed")
		}
		f.Add(b.Bytes())
	}
	lim := Limits{Record: 1 << 20, Parquet: 4 << 20}.WithDefaults()
	m := newMatcher([]string{"customer_id"}, []string{"session_id"}, "cust-1", []string{"sess-cust-1"})
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = rewrite("x.parquet", bytes.NewReader(data), io.Discard, m, lim)
		_, _ = scanMentions("x.parquet", bytes.NewReader(data), nil, m, newFinder(deletion.Subject{ID: "cust-1"}), "", lim)
	})
}
