package rows

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	pqformat "github.com/parquet-go/parquet-go/format"
)

// endless yields head, then fill without end, counting the bytes it yields. Past max it
// fails, so that a reader with no bound ends the test instead of the machine.
type endless struct {
	head  []byte
	fill  []byte
	phase int // of the next byte in fill
	n     int64
	max   int64
}

func (e *endless) Read(p []byte) (int, error) {
	if e.n >= e.max {
		return 0, errors.New("the generator was read past its cap: no bound stopped the reader")
	}
	p = p[:min(int64(len(p)), e.max-e.n)]
	k := copy(p, e.head)
	e.head = e.head[k:]
	for i := k; i < len(p); {
		c := copy(p[i:], e.fill[e.phase:])
		i += c
		e.phase = (e.phase + c) % len(e.fill)
	}
	e.n += int64(len(p))
	return len(p), nil
}

// lazyGzip compresses what src yields, lazily, and counts the compressed bytes read.
type lazyGzip struct {
	pr   *io.PipeReader
	n    int64
	done chan struct{}
}

func newLazyGzip(src io.Reader) *lazyGzip {
	pr, pw := io.Pipe()
	z := &lazyGzip{pr: pr, done: make(chan struct{})}
	go func() {
		defer close(z.done)
		zw, _ := gzip.NewWriterLevel(pw, gzip.BestSpeed)
		_, err := io.Copy(zw, src)
		if err == nil {
			err = zw.Close()
		}
		pw.CloseWithError(err)
	}()
	return z
}

func (z *lazyGzip) Read(p []byte) (int, error) {
	n, err := z.pr.Read(p)
	z.n += int64(n)
	return n, err
}

// Close stops the compressor and waits until it no longer reads its source.
func (z *lazyGzip) Close() {
	z.pr.Close()
	<-z.done
}

// walkers are the three walkers of a dataset: the row filter (rewriting), the mention
// scanner and the summary builder.
func walkers(lim Limits) map[string]func(key string, r io.Reader) error {
	m := newMatcher([]string{"customer_id"}, []string{"session_id"}, "cust-1", []string{"sess-1"})
	// the summary builder's walk: it compares nothing and collects every value
	none := func(string) bool { return false }
	collect := &Match{SubjectCols: m.SubjectCols, SessionCols: m.SessionCols, Subject: none, Session: none}
	return map[string]func(string, io.Reader) error{
		"filter": func(key string, r io.Reader) error {
			_, err := Rewrite(key, r, io.Discard, m, lim)
			return err
		},
		"mentions": func(key string, r io.Reader) error {
			_, err := Mentions(key, r, io.Discard, m, NewFinder("cust-1"), false, lim)
			return err
		},
		"summary": func(key string, r io.Reader) error {
			_, err := Mentions(key, r, nil, collect, &Finder{Collect: func(string) {}}, false, lim)
			return err
		},
	}
}

// TestRecordBound: a record, a line or an array element that never ends is refused with
// the record bound (here 1 MiB) by every walker of every text format, having read about
// the bound.
func TestRecordBound(t *testing.T) {
	lim := Limits{Record: 1 << 20}.WithDefaults()
	for _, tc := range []struct {
		key, head, fill, want string
	}{
		{"x.csv", "customer_id,question\ncust-2,", "a", "a record over the 1 MiB record bound"},
		{"x.csv", "customer_id,question\ncust-2,\"", "a\n", "a record over the 1 MiB record bound"},
		{"x.tsv", "customer_id\tquestion\ncust-2\t", "a", "a record over the 1 MiB record bound"},
		{"x.csv", "customer_id,question\n", ",", "a record over the 65536 fields per record bound"},
		{"x.jsonl", `{"customer_id":"cust-2"}` + "\n" + `{"question":"`, "a", "line 2 over the 1 MiB record bound"},
		{"x.json", `[{"customer_id":"cust-2"},{"question":"`, "a", "an array element over the 1 MiB record bound"},
		{"x.json", `[{"customer_id":"cust-2"},{"customer_id":[`, "1,", "an array element over the 1 MiB record bound"},
	} {
		for name, read := range walkers(lim) {
			t.Run(tc.key+"/"+name, func(t *testing.T) {
				src := &endless{head: []byte(tc.head), fill: []byte(tc.fill), max: 4 * lim.Record}
				err := read(tc.key, src)
				if !isBound(err) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("error %v; want %q", err, tc.want)
				}
				if src.n > lim.Record+4*bufferSize {
					t.Errorf("read %d bytes; want at most the bound and a few buffers", src.n)
				}
			})
		}
	}
}

// TestDecompressionBound: gzip content past the decompressed bound is refused by every
// walker, having decompressed about the bound, whatever the rows look like.
func TestDecompressionBound(t *testing.T) {
	lim := Limits{Decompressed: 1 << 20}.WithDefaults()
	for _, key := range []string{"x.csv.gz", "x.jsonl.gz", "x.json.gz"} {
		head, fill := "customer_id,question\n", "cust-2,hello\n"
		switch {
		case strings.HasPrefix(key, "x.jsonl"):
			head, fill = "", `{"customer_id":"cust-2"}`+"\n"
		case strings.HasPrefix(key, "x.json"):
			head, fill = "[", `{"customer_id":"cust-2"},`
		}
		for name, read := range walkers(lim) {
			t.Run(key+"/"+name, func(t *testing.T) {
				src := &endless{head: []byte(head), fill: []byte(fill), max: 64 * lim.Decompressed}
				z := newLazyGzip(src)
				err := read(key, z)
				z.Close()
				if !isBound(err) || !strings.Contains(err.Error(), "the decompressed content over the 1 MiB decompressed bound") {
					t.Fatalf("error %v; want the decompressed bound", err)
				}
				if src.n > lim.Decompressed+4*bufferSize+1<<20 { // what the compressor ran ahead
					t.Errorf("decompressed %d bytes; want about the bound", src.n)
				}
			})
		}
	}
}

// TestOneHugeFieldInASmallGzip: a small gzip CSV holding one 200 MiB field is refused at
// the default record bound, allocating a bounded amount, where reading it whole took the
// heap past a gibibyte.
func TestOneHugeFieldInASmallGzip(t *testing.T) {
	const field = 200 << 20
	src := &endless{head: []byte("customer_id,question\ncust-2,"), fill: []byte("a"), max: field}
	z := newLazyGzip(src)
	defer z.Close()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := Rewrite("x.csv.gz", z, io.Discard, newMatcher([]string{"customer_id"}, nil, "cust-1", nil), testLimits)
	runtime.ReadMemStats(&after)
	if !isBound(err) {
		t.Fatalf("error %v; want the record bound", err)
	}
	if got := strings.TrimPrefix(err.Error(), ErrMalformed.Error()+": "); got != "a record over the 16 MiB record bound" {
		t.Errorf("reason %q", got)
	}
	if z.n > 1<<20 {
		t.Errorf("read %d compressed bytes", z.n)
	}
	// Everything allocated (a bound of the peak), about 200 MiB with garbage included,
	// where reading the field took the heap past 1 GiB.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16*DefaultMaxRecord {
		t.Errorf("allocated %d MiB reading it", alloc>>20)
	}
}

// bigParquet is a Parquet file, compressed with codec, of one row whose columns q0, q1…
// each hold a value of n bytes (without statistics, which would copy them to the footer).
func bigParquet(t *testing.T, codec pqformat.CompressionCodec, n int, columns int) []byte {
	t.Helper()
	fields := parquet.Group{}
	fields["customer_id"] = parquet.String()
	row := map[string]any{"customer_id": "cust-2"}
	opts := []parquet.WriterOption{parquet.Compression(parquet.LookupCompressionCodec(codec)), parquet.DataPageStatistics(false)}
	for i := range columns {
		name := fmt.Sprintf("q%d", i)
		fields[name] = parquet.String()
		row[name] = strings.Repeat("a", n)
		opts = append(opts, parquet.SkipPageBounds(name))
	}
	var b bytes.Buffer
	w := parquet.NewGenericWriter[map[string]any](&b, append(opts, parquet.NewSchema("rows", fields))...)
	if _, err := w.Write([]map[string]any{row}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestParquetPageBound: a Parquet page that decompresses past the record bound is refused
// before the Parquet library reads it, by every walker and whatever the codec; brotli
// pages, whose size cannot be told before decompressing, are not read at all.
func TestParquetPageBound(t *testing.T) {
	lim := Limits{Record: 1 << 20}.WithDefaults()
	for _, codec := range []pqformat.CompressionCodec{pqformat.Uncompressed, pqformat.Snappy, pqformat.Gzip, pqformat.Zstd, pqformat.Lz4Raw, pqformat.Brotli} {
		data := bigParquet(t, codec, 2<<20, 1)
		want := "a parquet page, decoded, over the 1 MiB record bound"
		if codec == pqformat.Brotli {
			want = "brotli pages are not read"
		}
		for name, read := range walkers(lim) {
			t.Run(codec.String()+"/"+name, func(t *testing.T) {
				err := read("x.parquet", bytes.NewReader(data))
				if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), want) {
					t.Fatalf("error %v; want %q", err, want)
				}
			})
		}
		// Within the bound, the same file is read.
		if codec != pqformat.Brotli {
			if _, err := Rewrite("x.parquet", bytes.NewReader(data), io.Discard, newMatcher([]string{"customer_id"}, nil, "cust-1", nil), testLimits); err != nil {
				t.Errorf("%s within the bound: %v", codec, err)
			}
		}
	}
}

// TestParquetRowGroupBound: the pages one row group holds at once (the largest of each
// column) are bounded by the parquet bound, each page being within the record bound.
func TestParquetRowGroupBound(t *testing.T) {
	data := bigParquet(t, pqformat.Zstd, 600<<10, 4)
	lim := Limits{Record: 1 << 20, Parquet: 2 << 20}.WithDefaults()
	_, err := Rewrite("x.parquet", bytes.NewReader(data), io.Discard, newMatcher([]string{"customer_id"}, nil, "cust-1", nil), lim)
	if !isBound(err) || !strings.Contains(err.Error(), "the pages row group 1 holds at once over the 2 MiB parquet bound") {
		t.Fatalf("error %v; want the row group refused", err)
	}
	if _, err := Rewrite("x.parquet", bytes.NewReader(data), io.Discard, newMatcher([]string{"customer_id"}, nil, "cust-1", nil), testLimits); err != nil {
		t.Errorf("within the bounds: %v", err)
	}
}

// TestParquetFooterClaims: a footer claiming more elements than its bytes hold, or more
// than decoding may allocate, is refused before the Parquet library decodes it.
func TestParquetFooterClaims(t *testing.T) {
	file := func(footer []byte) []byte {
		b := append([]byte("PAR1"), footer...)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(footer)))
		return append(b, "PAR1"...)
	}
	huge := []byte{0x49, 0xFC} // field 4 (row groups): a list of structs, its size next
	huge = binary.AppendUvarint(huge, 1<<30)
	many := []byte{0x49, 0xFC}
	many = binary.AppendUvarint(many, 100_000)
	many = append(many, make([]byte, 100_000)...) // empty structs
	many = append(many, 0)
	deep := bytes.Repeat([]byte{0x1C}, 1000) // field 1, a struct, nested
	for name, tc := range map[string]struct {
		footer []byte
		want   string
	}{
		"count past its bytes": {append(huge, 0), "corrupt thrift encoding"},
		"decoding too large":   {many, "the parquet footer, decoded, over the 16 MiB record bound"},
		"nested too deep":      {deep, "corrupt thrift encoding"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Rewrite("x.parquet", bytes.NewReader(file(tc.footer)), io.Discard, newMatcher([]string{"customer_id"}, nil, "cust-1", nil), testLimits)
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v; want %q", err, tc.want)
			}
		})
	}
}

// TestPageSizes: the sizes read from each codec's framing are what the Parquet library's
// codecs decompress to (zstd: at least that), and corrupt LZ4 blocks, on which the
// library's decoder would grow its output without end, are refused.
func TestPageSizes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 100, 70_000, 1 << 20} {
		data := make([]byte, n)
		for i := range data {
			data[i] = "abcab"[rng.IntN(5)]
		}
		for _, c := range []pqformat.CompressionCodec{pqformat.Snappy, pqformat.Gzip, pqformat.Zstd, pqformat.Lz4Raw} {
			enc, err := parquet.LookupCompressionCodec(c).Encode(nil, data)
			if err != nil {
				t.Fatal(err)
			}
			if len(enc) == 0 && n > 0 {
				continue // the codec stores nothing for input it cannot compress
			}
			got, err := decompressedSize(enc, c, 1<<30)
			if err != nil || got < int64(n) || c != pqformat.Zstd && got != int64(n) {
				t.Errorf("%s of %d bytes: size %d, %v", c, n, got, err)
			}
		}
	}
	for name, block := range map[string][]byte{
		"offset past the output": {0x14, 'a', 0x05, 0x00},
		"zero offset":            {0x14, 'a', 0x00, 0x00},
		"literals past the end":  {0x50, 'a'},
		"no offset":              {0x14, 'a'},
		"unended match length":   {0x1F, 'a', 0x01, 0x00, 0xFF},
	} {
		if _, err := lz4Size(block, 1<<30); err == nil {
			t.Errorf("lz4 %s: accepted", name)
		}
	}
	// A zstd frame that declares more content than the bound is refused unread.
	frame := []byte{0x28, 0xB5, 0x2F, 0xFD, 0xE0} // single segment, 8-byte content size
	frame = binary.LittleEndian.AppendUint64(frame, 1<<40)
	frame = append(frame, 0x01, 0x00, 0x00)
	if n, err := zstdSize(frame, 1<<20); err != nil || n <= 1<<20 {
		t.Errorf("zstd frame of 1 TiB: size %d, %v", n, err)
	}
}
