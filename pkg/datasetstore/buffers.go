package datasetstore

import (
	"bufio"
	"io"
	"sync"
)

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
