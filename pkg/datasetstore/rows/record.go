package rows

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// maxFields bounds the fields of one CSV or TSV record (a parser holds about 40 bytes per
// field, whatever its length).
const maxFields = 1 << 16

// readAhead bounds one Read of a recorder: what its parser reads past a record.
const readAhead = 4 << 10

// recorder keeps the bytes read through it until they are taken, so the raw bytes of each
// CSV record (JSON array element) can be copied out after the parser read them. It holds
// one record and what its parser read ahead (at most readAhead). Once it holds more than
// lim.Record bytes besides, or a CSV record more than maxFields separators, its Read fails
// with a boundError, so that the parser above it never holds more either: this is the
// record bound of every walker.
type recorder struct {
	src   io.Reader
	lim   Limits
	what  string // what one record is, for the bound's error
	sep   byte   // the CSV separator whose count is bounded (0: none)
	seps  int    // separators in buf
	buf   []byte // the bytes read and not taken yet
	array []byte // what buf lies in, from its start
	base  int64  // input offset of buf[0]
	err   error  // the first read error other than io.EOF, or the bound passed
}

func newRecorder(src io.Reader, lim Limits, what string, sep byte) *recorder {
	return &recorder{src: src, lim: lim, what: what, sep: sep}
}

func (r *recorder) Read(p []byte) (int, error) {
	if r.err != nil && isBound(r.err) {
		return 0, r.err
	}
	p = p[:min(len(p), readAhead)]
	n, err := r.src.Read(p)
	if len(r.buf)+n > cap(r.buf) {
		// buf reached the end of its array: move it to the array's start when it fits
		// there (what was taken before is no longer valid), else to a larger array
		if len(r.buf)+n > len(r.array) {
			r.array = make([]byte, 2*(len(r.buf)+n))
		}
		r.buf = r.array[:copy(r.array, r.buf)]
	}
	r.buf = append(r.buf, p[:n]...)
	if r.sep != 0 {
		r.seps += bytes.Count(p[:n], []byte{r.sep})
	}
	if err != nil && err != io.EOF && r.err == nil {
		r.err = err
	}
	switch {
	case r.err != nil:
	case int64(len(r.buf)) > r.lim.Record+readAhead:
		r.err = overRecord(r.what, r.lim)
	case r.seps > maxFields+readAhead:
		r.err = &boundError{what: r.what, bound: fmt.Sprintf("%d fields per record", maxFields)}
	}
	if r.err != nil && isBound(r.err) {
		return n, r.err
	}
	return n, err
}

// take returns the recorded bytes up to input offset end and forgets them. The slice is
// valid until the next Read.
func (r *recorder) take(end int64) []byte {
	k := int(end - r.base)
	out := r.buf[:k]
	r.buf = r.buf[k:]
	r.base = end
	if r.sep != 0 {
		r.seps -= bytes.Count(out, []byte{r.sep})
	}
	return out
}

// rest takes every recorded byte.
func (r *recorder) rest() []byte { return r.take(r.base + int64(len(r.buf))) }

// failed is the error to return for a parser that failed over r: the bound passed, or
// the source's read error; nil when r saw neither (the content is at fault).
func (r *recorder) failed() error {
	switch {
	case r.err == nil:
		return nil
	case errors.Is(r.err, ErrMalformed):
		return r.err
	}
	return fmt.Errorf("read: %w", r.err)
}

// readLine reads line lineNo of br, its '\n' included, into line[:0]. A line of more than
// lim.Record bytes is a boundError, read no further: this is the line bound of the JSONL
// walker and Sample alike. At the end it returns io.EOF with the last line
// (possibly empty); a read error is returned as "read: ...".
func readLine(br *bufio.Reader, line []byte, lineNo int, lim Limits) ([]byte, error) {
	line = line[:0]
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if int64(len(line)) > lim.Record {
			return line, overRecord(fmt.Sprintf("line %d", lineNo), lim)
		}
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == nil || err == io.EOF:
			return line, err
		case errors.Is(err, ErrMalformed):
			return line, err
		}
		return line, fmt.Errorf("read: %w", err)
	}
}
