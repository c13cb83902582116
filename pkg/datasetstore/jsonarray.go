package datasetstore

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// filterJSONArray filters a JSON array of objects, streaming it one element at a time (each
// at most lim.Record bytes): the bytes before, between and after the kept elements are
// copied as they are, and a comma goes with the element it precedes, so dropping elements
// leaves a valid array with the original layout.
func filterJSONArray(src io.Reader, w *bufio.Writer, m *matcher, lim Limits) (int, error) {
	rec := newRecorder(src, lim, "an array element", 0)
	dec := json.NewDecoder(rec)
	dec.UseNumber()
	bad := func(format string, args ...any) error {
		if err := rec.failed(); err != nil {
			return err
		}
		return malformed(format, args...)
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return 0, bad("not a json array")
	}
	if _, err := w.Write(rec.take(dec.InputOffset())); err != nil {
		return 0, err
	}
	dropped, kept := 0, 0
	for i := 1; dec.More(); i++ {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			if endOfInput(err) {
				return dropped, bad("unterminated json array")
			}
			return dropped, bad("element %d is not valid json", i)
		}
		chunk := rec.take(dec.InputOffset())
		ed := json.NewDecoder(bytes.NewReader(raw))
		ed.UseNumber()
		match, err := matchObject(ed, m)
		if err != nil {
			return dropped, bad("element %d: %v", i, err)
		}
		if match {
			dropped++
			continue
		}
		sep := chunk[:len(chunk)-len(raw)]
		if kept == 0 && i > 1 {
			sep = bytes.Replace(sep, []byte(","), nil, 1) // it now comes first
		}
		if _, err := w.Write(sep); err != nil {
			return dropped, err
		}
		if _, err := w.Write(raw); err != nil {
			return dropped, err
		}
		kept++
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim(']') {
		return dropped, bad("unterminated json array")
	}
	if _, err := w.Write(rec.take(dec.InputOffset())); err != nil {
		return dropped, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return dropped, bad("data after the json array")
	}
	if err := rec.failed(); err != nil {
		return dropped, err
	}
	_, err := w.Write(rec.take(rec.base + int64(len(rec.buf))))
	return dropped, err
}

// endOfInput reports whether a Decode error says the input ended where a value should start.
// Since Go 1.27, encoding/json (on json/v2) has More report another element at the end of
// the input, and the Decode that follows fails with this syntax error, which has no
// sentinel to test.
func endOfInput(err error) bool {
	var se *json.SyntaxError
	return errors.As(err, &se) && se.Error() == "unexpected end of JSON input"
}
