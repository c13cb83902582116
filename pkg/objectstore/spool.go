package objectstore

import (
	"bytes"
	"io"
	"os"
	"sync"
)

// spoolMemory is how much of a rewrite a spool holds in memory before it moves to a
// temporary file.
const spoolMemory = 4 << 20

var spoolBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// spool stages a rewrite before its upload, which needs a known length: in memory while it
// is at most spoolMemory bytes (most objects: no file written, nothing left on disk), in a
// temporary file beyond, so that objects of any size stream. close discards it.
type spool struct {
	mem  *bytes.Buffer
	file *os.File
}

func newSpool() *spool {
	b := spoolBuffers.Get().(*bytes.Buffer)
	b.Reset()
	return &spool{mem: b}
}

func (s *spool) Write(p []byte) (int, error) {
	if s.file == nil && s.mem.Len()+len(p) > spoolMemory {
		f, err := os.CreateTemp("", "lethe-dataset-*")
		if err != nil {
			return 0, err
		}
		s.file = f
		if _, err := f.Write(s.mem.Bytes()); err != nil {
			return 0, err
		}
		s.mem.Reset()
	}
	if s.file != nil {
		return s.file.Write(p)
	}
	return s.mem.Write(p)
}

// body returns what was written, from its start.
func (s *spool) body() (io.ReadSeeker, error) {
	if s.file == nil {
		return bytes.NewReader(s.mem.Bytes()), nil
	}
	_, err := s.file.Seek(0, io.SeekStart)
	return s.file, err
}

func (s *spool) close() {
	if s.file != nil {
		s.file.Close()
		os.Remove(s.file.Name())
	}
	if s.mem.Cap() <= spoolMemory+bufferSize { // a buffer that grew for one huge write is not kept
		clear(s.mem.Bytes()[:s.mem.Cap()])
		spoolBuffers.Put(s.mem)
	}
	s.mem = nil
}
