package datasetstore

import (
	"bytes"
	"compress/gzip"
	"context"
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

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/deletion/deletiontest"
	"github.com/lethe-erasure/lethe/pkg/envconf"
	"github.com/lethe-erasure/lethe/pkg/event"
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
	sum := &summaries{key: deletiontest.Key, memo: newPrefixMemo()}
	return map[string]func(string, io.Reader) error{
		"filter": func(key string, r io.Reader) error {
			_, err := rewrite(key, r, io.Discard, m, lim)
			return err
		},
		"mentions": func(key string, r io.Reader) error {
			_, err := scanMentions(key, r, io.Discard, m, newFinder(deletion.Subject{ID: "cust-1"}), MentionsRedact, lim)
			return err
		},
		"summary": func(key string, r io.Reader) error {
			_, err := sum.build(key, r, "acme", m, lim)
			return err
		},
	}
}

// TestRecordBound: a record, a line or an array element that never ends is refused with
// the record bound (here 1 MiB) by every walker of every text format, having read about
// the bound.
func TestRecordBound(t *testing.T) {
	lim := Limits{Record: 1 << 20}.withDefaults()
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
	lim := Limits{Decompressed: 1 << 20}.withDefaults()
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
	_, err := rewrite("x.csv.gz", z, io.Discard, newMatcher([]string{"customer_id"}, nil, "cust-1", nil), testLimits)
	runtime.ReadMemStats(&after)
	if !isBound(err) {
		t.Fatalf("error %v; want the record bound", err)
	}
	if got := reason(err); got != "a record over the 16 MiB record bound" {
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
	lim := Limits{Record: 1 << 20}.withDefaults()
	for _, codec := range []pqformat.CompressionCodec{pqformat.Uncompressed, pqformat.Snappy, pqformat.Gzip, pqformat.Zstd, pqformat.Lz4Raw, pqformat.Brotli} {
		data := bigParquet(t, codec, 2<<20, 1)
		want := "a parquet page, decoded, over the 1 MiB record bound"
		if codec == pqformat.Brotli {
			want = "brotli pages are not read"
		}
		for name, read := range walkers(lim) {
			t.Run(codec.String()+"/"+name, func(t *testing.T) {
				err := read("x.parquet", bytes.NewReader(data))
				if !errors.Is(err, errMalformed) || !strings.Contains(err.Error(), want) {
					t.Fatalf("error %v; want %q", err, want)
				}
			})
		}
		// Within the bound, the same file is read.
		if codec != pqformat.Brotli {
			if _, err := rewrite("x.parquet", bytes.NewReader(data), io.Discard, newMatcher([]string{"customer_id"}, nil, "cust-1", nil), testLimits); err != nil {
				t.Errorf("%s within the bound: %v", codec, err)
			}
		}
	}
}

// TestParquetRowGroupBound: the pages one row group holds at once (the largest of each
// column) are bounded by the parquet bound, each page being within the record bound.
func TestParquetRowGroupBound(t *testing.T) {
	data := bigParquet(t, pqformat.Zstd, 600<<10, 4)
	lim := Limits{Record: 1 << 20, Parquet: 2 << 20}.withDefaults()
	_, err := rewrite("x.parquet", bytes.NewReader(data), io.Discard, newMatcher([]string{"customer_id"}, nil, "cust-1", nil), lim)
	if !isBound(err) || !strings.Contains(err.Error(), "the pages row group 1 holds at once over the 2 MiB parquet bound") {
		t.Fatalf("error %v; want the row group refused", err)
	}
	if _, err := rewrite("x.parquet", bytes.NewReader(data), io.Discard, newMatcher([]string{"customer_id"}, nil, "cust-1", nil), testLimits); err != nil {
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
			_, err := rewrite("x.parquet", bytes.NewReader(file(tc.footer)), io.Discard, newMatcher([]string{"customer_id"}, nil, "cust-1", nil), testLimits)
			if !errors.Is(err, errMalformed) || !strings.Contains(err.Error(), tc.want) {
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

// TestBoundedObjectsAreUnexamined: through the store, with summaries and mention
// redaction on, each object past a bound is unexamined with the bound named, is left byte
// for byte, and is never counted as holding nothing; the readable dataset is erased.
func TestBoundedObjectsAreUnexamined(t *testing.T) {
	const record = 64 << 10
	lim := Limits{Record: record, Decompressed: 256 << 10}
	big := strings.Repeat("x", record+readAhead+1)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = io.WriteString(zw, "customer_id,question\n"+strings.Repeat("cust-2,hello there\n", 20_000)+"cust-1,mine\n")
	_ = zw.Close()
	all, _ := formatRows()
	objects := map[string]struct {
		data []byte
		want string
	}{
		"acme/big.csv":        {[]byte("customer_id,question\ncust-1," + big + "\ncust-2,ok\n"), "a record over the 64 KiB record bound"},
		"acme/big.tsv":        {[]byte("customer_id\tquestion\ncust-1\t" + big + "\n"), "a record over the 64 KiB record bound"},
		"acme/big.jsonl":      {[]byte(`{"customer_id":"cust-1","question":"` + big + `"}` + "\n"), "line 1 over the 64 KiB record bound"},
		"acme/big.json":       {[]byte(`[{"customer_id":"cust-1","question":"` + big + `"}]`), "an array element over the 64 KiB record bound"},
		"acme/big.csv.gz":     {gz.Bytes(), "the decompressed content over the 256 KiB decompressed bound"},
		"acme/big.parquet":    {bigParquet(t, pqformat.Zstd, record+1, 1), "a parquet page, decoded, over the 64 KiB record bound"},
		"acme/brotli.parquet": {bigParquet(t, pqformat.Brotli, 100, 1), "brotli pages are not read"},
	}
	c := newS3Client(t)
	w := s3World{c}
	for k, o := range objects {
		w.put(t, k, o.data)
	}
	w.put(t, "acme/good.csv", delimited(',').encode(t, all))
	st := testInventory("s3://" + testBucket + "/{tenant}/")
	st.Locators = st.Locators.With("mentions", MentionsRedact)
	ctx := context.Background()
	victim := deletiontest.NewSubject("acme", "cust-1")
	rows := int64(countRows(t, "good.csv", delimited(',').encode(t, all), victim))
	for round := range 2 { // the second round reads through the summaries the first wrote
		store := New(c, "", withSummaries, WithLimits(lim))
		if n, err := store.Count(ctx, st, victim); err != nil || round == 0 && n.Deleted() != rows {
			t.Fatalf("count %+v, %v; want the good dataset's %d rows only", n, err, rows)
		}
		res, v := eraseAndVerify(t, store, st, victim)
		if got := deletion.StatusOf(res, v); got != event.StatusFailed || v.Remaining != 0 || v.Mentions != 0 {
			t.Fatalf("round %d: status %s, %+v; want FAILED, the good dataset erased", round, got, v)
		}
		if v.Unexamined != int64(len(objects)) {
			t.Fatalf("round %d: unexamined %d, want %d: %q", round, v.Unexamined, len(objects), v.UnexaminedItems)
		}
		for k, o := range objects {
			n := 0
			for _, item := range v.UnexaminedItems {
				if strings.Contains(item, o.want) {
					n++
				}
			}
			if n == 0 {
				t.Errorf("%s: no item names %q in %q", k, o.want, v.UnexaminedItems)
			}
			if got := w.versions(t, k); len(got) != 1 || !bytes.Equal(got[0], o.data) {
				t.Errorf("%s was changed", k)
			}
		}
	}
}

func TestSettings(t *testing.T) {
	env := map[string]string{"LETHE_DATASET_MAX_RECORD": "8MiB", "LETHE_DATASET_MAX_DECOMPRESSED": "1073741824"}
	var s Settings
	err := envconf.Load(&s, func(k string) string { return env[k] })
	if l := s.Limits(); err != nil || l != (Limits{Record: 8 << 20, Decompressed: 1 << 30, Parquet: DefaultMaxParquet}) || s.Summaries != "on" {
		t.Errorf("settings %+v, limits %+v, %v", s, l, err)
	}
	if err := envconf.Defaults(&s); err != nil || s.Limits() != (Limits{}).withDefaults() {
		t.Errorf("default limits %+v, %v; want the package's defaults", s.Limits(), err)
	}
	for _, bad := range []string{"0", "-1", "8 MB", "lots", "9999999999GiB"} {
		env["LETHE_DATASET_MAX_PARQUET"] = bad
		if err := envconf.Load(&s, func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "LETHE_DATASET_MAX_PARQUET") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	env = map[string]string{"LETHE_DATASET_SUMMARIES": "no"}
	if err := envconf.Load(&s, func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "LETHE_DATASET_SUMMARIES") {
		t.Errorf("summaries no: %v", err)
	}
	var b strings.Builder
	if err := envconf.Print(&b, Settings{Summaries: "off", MaxRecord: 8 << 20, MaxDecompressed: 1 << 30, MaxParquet: 1000}); err != nil ||
		!strings.Contains(b.String(), "LETHE_DATASET_MAX_RECORD=8MiB\nLETHE_DATASET_MAX_DECOMPRESSED=1GiB\nLETHE_DATASET_MAX_PARQUET=1000\n") {
		t.Errorf("printed %q, %v", b.String(), err)
	}
}
