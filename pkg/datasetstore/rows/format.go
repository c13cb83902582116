package rows

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"sync"
)

// format is the encoding of a dataset once decompressed.
type format int

const (
	formatCSV       format = iota + 1 // CSV with a header row
	formatJSONL                       // one JSON object per line (JSONL, NDJSON)
	formatTSV                         // CSV with tabs
	formatJSONArray                   // one JSON array of objects
	formatParquet                     // Apache Parquet
	formatEmpty                       // no bytes at all: nothing to read, whatever the name
)

func (f format) String() string {
	switch f {
	case formatCSV:
		return "csv"
	case formatJSONL:
		return "jsonl"
	case formatTSV:
		return "tsv"
	case formatJSONArray:
		return "json array"
	case formatParquet:
		return "parquet"
	case formatEmpty:
		return "empty"
	}
	return fmt.Sprintf("format %d", int(f))
}

// byExtension is the format an extension (lower case) names; ".json" is settled by content.
var byExtension = map[string]format{
	".csv":     formatCSV,
	".tsv":     formatTSV,
	".tab":     formatTSV,
	".jsonl":   formatJSONL,
	".ndjson":  formatJSONL,
	".parquet": formatParquet,
	".pq":      formatParquet,
}

var (
	gzipMagic    = []byte{0x1f, 0x8b}
	parquetMagic = []byte("PAR1")
)

// ErrMalformed marks content this package cannot read or decode, or that passes the
// Limits: such an object is to be left as it is and reported unexamined.
var ErrMalformed = errors.New("malformed dataset")

// malformed is an ErrMalformed saying why; reasons name places and formats, never values.
func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// tracked remembers the first error other than io.EOF of the reader or writer it wraps,
// so that a failure can be told apart: the transport's (transient) from the content's.
type tracked struct {
	r   io.Reader
	w   io.Writer
	err error
}

func (t *tracked) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if err != nil && err != io.EOF && t.err == nil {
		t.err = err
	}
	return n, err
}

func (t *tracked) Write(p []byte) (int, error) {
	n, err := t.w.Write(p)
	if err != nil && t.err == nil {
		t.err = err
	}
	return n, err
}

// transcode runs fn from body to w (nil: none) and tells its failures apart: the
// destination's or the source's are returned as such, content that cannot be decoded
// wraps ErrMalformed.
func transcode(body io.Reader, w io.Writer, fn func(src io.Reader, dst *tracked) error) error {
	src := &tracked{r: body}
	var dst *tracked
	if w != nil {
		dst = &tracked{w: w}
	}
	err := fn(src, dst)
	switch {
	case err == nil:
		return nil
	case dst != nil && dst.err != nil:
		return fmt.Errorf("write: %w", dst.err)
	case src.err != nil:
		return fmt.Errorf("read: %w", src.err)
	case errors.Is(err, ErrMalformed):
		return err
	}
	// The source and the destination did not fail: the decompressor did.
	return malformed("%v", err)
}

// open settles the compression and the format of the dataset key read from src, and
// returns its decompressed content (zr is the decompressor of gzip content, nil otherwise),
// which fails with a boundError past lim.Decompressed bytes: this is the decompression
// bound of every reader of the package. The caller calls release once it read content,
// whatever err.
func open(key string, src io.Reader, lim Limits) (f format, content *bufio.Reader, zr *gzip.Reader, release func(), err error) {
	raw := newReader(src)
	content, release = raw, func() { releaseReader(raw) }
	if head, _ := content.Peek(len(gzipMagic)); bytes.Equal(head, gzipMagic) {
		if zr, err = gzip.NewReader(content); err != nil {
			return 0, nil, nil, release, malformed("gzip: %v", err)
		}
		unzipped := newReader(&capped{r: zr, left: lim.Decompressed, lim: lim})
		content, release = unzipped, func() { releaseReader(unzipped); releaseReader(raw) }
	}
	f, err = sniff(key, content)
	return f, content, zr, release, err
}

// capped reads r until left bytes were read, then fails with the decompression bound.
type capped struct {
	r    io.Reader
	left int64
	lim  Limits
}

func (c *capped) Read(p []byte) (int, error) {
	if c.left <= 0 {
		var one [1]byte // the end, or a byte past the bound
		n, err := c.r.Read(one[:])
		if n == 0 {
			return 0, err
		}
		return 0, overDecompressed(c.lim)
	}
	p = p[:min(int64(len(p)), c.left)]
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

// Probe settles that the object key read from body is a dataset of a known format, reading
// only its start; it fails as Rewrite does.
func Probe(key string, body io.Reader, lim Limits) error {
	src := &tracked{r: body}
	_, _, _, release, err := open(key, src, lim)
	release()
	switch {
	case err == nil || errors.Is(err, ErrMalformed):
		return err
	case src.err != nil:
		return fmt.Errorf("read: %w", src.err)
	}
	return malformed("%v", err)
}

// KnownExtension reports whether key ends in a dataset extension (ignoring case and a
// ".gz" suffix).
func KnownExtension(key string) bool {
	_, ok := byExtension[extension(key)]
	return ok || extension(key) == ".json"
}

// extension is the lower-case extension of key's name without a ".gz" suffix.
func extension(key string) string {
	return path.Ext(strings.TrimSuffix(strings.ToLower(path.Base(key)), ".gz"))
}

// sniff settles the format of the decompressed content r, which it peeks at.
func sniff(key string, r *bufio.Reader) (format, error) {
	head, err := r.Peek(512)
	if len(head) == 0 {
		if err != nil && err != io.EOF {
			return 0, err
		}
		return formatEmpty, nil
	}
	if bytes.HasPrefix(head, parquetMagic) {
		return formatParquet, nil
	}
	ext := extension(key)
	if f, ok := byExtension[ext]; ok {
		if f == formatParquet {
			return 0, malformed("no parquet magic number")
		}
		return f, nil
	}
	switch first := bytes.TrimLeft(bytes.TrimPrefix(head, []byte("\ufeff")), " \t\r\n"); {
	case len(first) > 0 && first[0] == '[':
		return formatJSONArray, nil
	case len(first) > 0 && first[0] == '{':
		return formatJSONL, nil // a JSON file of one object over several lines does not parse
	}
	if ext == ".json" {
		return 0, malformed("json that is neither an array nor objects, one per line")
	}
	return 0, malformed("format not recognised (csv, tsv, jsonl, json, parquet, each possibly gzip-compressed)")
}

// bufferSize is the size of the read and write buffers over datasets.
const bufferSize = 64 << 10

// Buffers are reused: a batch reads and writes whole objects many times a second, and a
// fresh 64 KiB buffer each time is most of what the store allocates.
var (
	readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, bufferSize) }}
	writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, bufferSize) }}
)

// newReader returns a buffered reader of r; release gives it back once nothing reads it.
func newReader(r io.Reader) *bufio.Reader {
	br := readers.Get().(*bufio.Reader)
	br.Reset(r)
	return br
}

// newWriter returns a buffered writer to w; release gives it back once flushed (or
// abandoned: what it holds is dropped).
func newWriter(w io.Writer) *bufio.Writer {
	bw := writers.Get().(*bufio.Writer)
	bw.Reset(w)
	return bw
}

func releaseReader(br *bufio.Reader) {
	br.Reset(nil)
	readers.Put(br)
}

func releaseWriter(bw *bufio.Writer) {
	bw.Reset(nil)
	writers.Put(bw)
}
