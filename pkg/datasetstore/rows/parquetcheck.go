package rows

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go"
	pqformat "github.com/parquet-go/parquet-go/format"
)

// The Parquet library sizes what it allocates after the file's own claims (list counts and
// lengths in the footer and page headers, a page's sizes) and decompresses pages without a
// bound. openParquet therefore checks a file before the library reads it: the footer's
// counts and lengths against the bytes that hold them, the page index (which the library
// then skips) likewise, and every page of every column chunk — its header, its size once
// decompressed (from the codec's own framing, never by trusting the header), and what
// decoding its values takes — against lim. A file that fails is malformed (unexamined),
// never read further; so is one the library panics on (recovered).
// openParquet reads a Parquet object whole from r and opens it, once checked against lim
// (see above). It is the one way the package opens Parquet: every walker and Sample read
// through it. A read error of r is
// returned as is; content past lim or not Parquet wraps ErrMalformed.
func openParquet(r io.Reader, lim Limits) (*parquet.File, error) {
	data, err := io.ReadAll(io.LimitReader(r, lim.Parquet+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > lim.Parquet {
		return nil, overParquet("the parquet object", lim)
	}
	if err := checkFooter(data, lim); err != nil {
		return nil, err
	}
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)), parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		return nil, malformed("parquet: %v", err)
	}
	if err := checkPageIndex(data, f.Metadata(), lim); err != nil {
		return nil, err
	}
	if err := checkPages(data, f.Metadata(), lim); err != nil {
		return nil, err
	}
	return f, nil
}

// recovered turns a panic of the Parquet library into a malformed error (the panic's value
// is dropped: it may quote content). Deferred by every reader of Parquet rows.
func recovered(err *error) {
	if r := recover(); r != nil {
		*err = malformed("parquet: the parquet reader failed on this content")
	}
}

// checkPageIndex checks that the column and offset indexes md names lie in data and are
// each exactly one Thrift struct within lim.Record; the library skips them, but a file
// whose index does not hold together is not read.
func checkPageIndex(data []byte, md *pqformat.FileMetaData, lim Limits) error {
	for g, rg := range md.RowGroups {
		for _, cc := range rg.Columns {
			for _, ix := range [2]struct {
				off int64
				n   int32
			}{{cc.ColumnIndexOffset, cc.ColumnIndexLength}, {cc.OffsetIndexOffset, cc.OffsetIndexLength}} {
				if ix.off == 0 && ix.n == 0 {
					continue
				}
				if ix.off <= 0 || ix.n <= 0 || int64(ix.n) > int64(len(data))-ix.off {
					return malformed("parquet row group %d: a page index past the file", g+1)
				}
				c := &compact{b: data[ix.off : ix.off+int64(ix.n)], budget: lim.Record}
				if err := c.skip(tStruct, false); err != nil || c.off != len(c.b) {
					return malformed("parquet row group %d: a corrupt page index", g+1)
				}
			}
		}
	}
	return nil
}

// Decoding estimates: the most a decoded footer element takes (a column chunk's Go
// value), and what decoding one page value takes besides the page's bytes (the value and
// its repetition and definition levels).
const (
	footerElement = 560
	bytesPerValue = 12
)

// checkFooter checks the footer of the Parquet file data: both magic numbers, a length
// inside the file and within lim.Record, and a Thrift encoding whose every count and length
// fits the bytes left and whose decoding allocates at most lim.Record.
func checkFooter(data []byte, lim Limits) error {
	if len(data) < 12 || !bytes.HasPrefix(data, parquetMagic) || !bytes.HasSuffix(data, parquetMagic) {
		return malformed("parquet: no magic number at both ends (encrypted footers are not read)")
	}
	n := int64(binary.LittleEndian.Uint32(data[len(data)-8:]))
	if n > int64(len(data)-12) {
		return malformed("parquet: footer length past the file")
	}
	if n > lim.Record {
		return overRecord("the parquet footer", lim)
	}
	c := &compact{b: data[int64(len(data)-8)-n : len(data)-8], budget: lim.Record}
	if err := c.skip(tStruct, false); err != nil {
		if isBound(err) {
			return overRecord("the parquet footer, decoded,", lim)
		}
		return malformed("parquet footer: %v", err)
	}
	return nil
}

// checkPages walks the pages of every column chunk md describes in data. Each page must lie
// in its chunk, decompress (by its codec's framing) and decode to at most lim.Record; per
// row group, the largest page of each column with its dictionary, what reading the group's
// rows holds at once, must total at most lim.Parquet.
func checkPages(data []byte, md *pqformat.FileMetaData, lim Limits) error {
	for g, rg := range md.RowGroups {
		var held int64
		for _, cc := range rg.Columns {
			m := cc.MetaData
			start := m.DataPageOffset
			if m.DictionaryPageOffset != 0 {
				start = m.DictionaryPageOffset
			}
			if start < 0 || m.TotalCompressedSize < 0 || m.TotalCompressedSize > int64(len(data))-start {
				return malformed("parquet row group %d: a column chunk past the file", g+1)
			}
			largest, dict, err := chunkPages(data[start:start+m.TotalCompressedSize], m.Codec, m.NumValues, lim)
			if err != nil {
				if isBound(err) {
					return err
				}
				return malformed("parquet row group %d: %v", g+1, err)
			}
			held += largest + dict
		}
		if held > lim.Parquet {
			return overParquet(fmt.Sprintf("the pages row group %d holds at once", g+1), lim)
		}
	}
	return nil
}

// pageHeader is what checkPages reads of a Parquet page header.
type pageHeader struct {
	typ                  int32
	uncompressed, stored int32 // uncompressed_page_size, compressed_page_size
	values               int32 // num_values of the data, data v2 or dictionary page header
	levels               int64 // data page v2: its uncompressed levels' length
	compressed           bool  // data page v2: is_compressed (true unless said otherwise)
}

// chunkPages walks the pages of one column chunk b, compressed with codec, until its data
// pages hold values values (a reader stops there), and returns the decoding cost of its
// largest data page and of its dictionary pages.
func chunkPages(b []byte, codec pqformat.CompressionCodec, values int64, lim Limits) (largest, dict int64, err error) {
	var seen int64
	for off := 0; off < len(b) && (values <= 0 || seen < values); {
		c := &compact{b: b[off:], budget: lim.Record}
		h, err := readPageHeader(c)
		if isBound(err) {
			return 0, 0, overRecord("a parquet page header, decoded,", lim)
		}
		if err != nil {
			return 0, 0, fmt.Errorf("page header: %w", err)
		}
		off += c.off
		if h.stored < 0 || h.uncompressed < 0 || h.values < 0 || int(h.stored) > len(b)-off {
			return 0, 0, fmt.Errorf("a page past its column chunk")
		}
		body := b[off : off+int(h.stored)]
		off += int(h.stored)
		size, err := pageSize(body, codec, h, lim.Record)
		if err != nil {
			return 0, 0, err
		}
		cost := max(size, int64(h.uncompressed)) + bytesPerValue*int64(h.values)
		if cost > lim.Record {
			return 0, 0, overRecord("a parquet page, decoded,", lim)
		}
		switch pqformat.PageType(h.typ) {
		case pqformat.DictionaryPage:
			dict += cost
		case pqformat.DataPage, pqformat.DataPageV2:
			seen += int64(h.values)
			largest = max(largest, cost)
		default:
			largest = max(largest, cost)
		}
	}
	return largest, dict, nil
}

// readPageHeader reads a page header (Thrift struct PageHeader) from c.
func readPageHeader(c *compact) (pageHeader, error) {
	h := pageHeader{compressed: true}
	err := c.fields(func(id int16, t byte) error {
		var err error
		switch id {
		case 1:
			h.typ, err = c.i32(t)
		case 2:
			h.uncompressed, err = c.i32(t)
		case 3:
			h.stored, err = c.i32(t)
		case 5, 7: // data page header, dictionary page header: num_values first
			err = c.nested(t, func(id int16, t byte) error {
				if id != 1 {
					return c.skip(t, false)
				}
				var err error
				h.values, err = c.i32(t)
				return err
			})
		case 8: // data page header v2
			err = c.nested(t, func(id int16, t byte) error {
				var n int32
				var err error
				switch id {
				case 1:
					h.values, err = c.i32(t)
				case 5, 6: // definition and repetition levels' lengths
					if n, err = c.i32(t); n < 0 {
						return fmt.Errorf("negative levels length")
					}
					h.levels += int64(n)
				case 7:
					if t == tTrue || t == tFalse {
						h.compressed = t == tTrue
						return nil
					}
					return c.skip(t, false)
				default:
					return c.skip(t, false)
				}
				return err
			})
		default:
			err = c.skip(t, false)
		}
		return err
	})
	return h, err
}

// pageSize is what body, the stored bytes of a page with header h, decompresses to with
// codec, read from the codec's own framing (an upper bound for zstd); it stops counting
// past limit.
func pageSize(body []byte, codec pqformat.CompressionCodec, h pageHeader, limit int64) (int64, error) {
	if pqformat.PageType(h.typ) == pqformat.DataPageV2 {
		if h.levels > int64(len(body)) {
			return 0, fmt.Errorf("page levels past the page")
		}
		if !h.compressed {
			return int64(len(body)), nil
		}
		n, err := decompressedSize(body[h.levels:], codec, limit)
		return h.levels + n, err
	}
	return decompressedSize(body, codec, limit)
}

func decompressedSize(b []byte, codec pqformat.CompressionCodec, limit int64) (int64, error) {
	switch codec {
	case pqformat.Uncompressed:
		return int64(len(b)), nil
	case pqformat.Snappy:
		n, k := binary.Uvarint(b) // a snappy block starts with its decoded length
		if k <= 0 || n > 1<<32 {
			return 0, fmt.Errorf("corrupt snappy page")
		}
		return int64(n), nil
	case pqformat.Gzip:
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return 0, fmt.Errorf("gzip page: %v", err)
		}
		n, err := io.Copy(io.Discard, io.LimitReader(zr, limit+1))
		if err != nil {
			return 0, fmt.Errorf("gzip page: %v", err)
		}
		return n, nil
	case pqformat.Zstd:
		return zstdSize(b, limit)
	case pqformat.Lz4Raw:
		return lz4Size(b, limit)
	case pqformat.Brotli:
		return 0, fmt.Errorf("brotli pages are not read: their size cannot be bounded before decompressing")
	}
	return 0, fmt.Errorf("compression codec %v not supported", codec)
}

// zstdSize is an upper bound of what the zstd frames in b decompress to, from their
// headers alone: per frame, its declared content size or the sizes of its raw and RLE
// blocks and 128 KiB (the most a block holds) per compressed block, whichever is larger.
// It stops past limit.
func zstdSize(b []byte, limit int64) (int64, error) {
	bad := fmt.Errorf("corrupt zstd page")
	var total int64
	for len(b) > 0 {
		if len(b) < 8 {
			return 0, bad
		}
		magic := binary.LittleEndian.Uint32(b)
		if magic&0xFFFFFFF0 == 0x184D2A50 { // a skippable frame
			n := int64(binary.LittleEndian.Uint32(b[4:]))
			if n > int64(len(b)-8) {
				return 0, bad
			}
			b = b[8+n:]
			continue
		}
		if magic != 0xFD2FB528 {
			return 0, bad
		}
		fhd := b[4]
		b = b[5:]
		if fhd&0x08 != 0 {
			return 0, bad
		}
		single := fhd&0x20 != 0
		skip := [4]int{0, 1, 2, 4}[fhd&3] // dictionary id
		if !single {
			skip++ // window descriptor
		}
		fcsLen := [4]int{0, 2, 4, 8}[fhd>>6]
		if fcsLen == 0 && single {
			fcsLen = 1
		}
		if len(b) < skip+fcsLen {
			return 0, bad
		}
		b = b[skip:]
		var fcs int64
		switch fcsLen {
		case 1:
			fcs = int64(b[0])
		case 2:
			fcs = int64(binary.LittleEndian.Uint16(b)) + 256
		case 4:
			fcs = int64(binary.LittleEndian.Uint32(b))
		case 8:
			if v := binary.LittleEndian.Uint64(b); v > uint64(limit) {
				fcs = limit + 1
			} else {
				fcs = int64(v)
			}
		}
		b = b[fcsLen:]
		if total+fcs > limit {
			return total + fcs, nil
		}
		var frame int64
		for last := false; !last; {
			if len(b) < 3 {
				return 0, bad
			}
			h := uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16
			b = b[3:]
			last = h&1 != 0
			size := int64(h >> 3)
			switch (h >> 1) & 3 {
			case 0: // raw
				if size > int64(len(b)) {
					return 0, bad
				}
				b, frame = b[size:], frame+size
			case 1: // RLE: one byte repeated size times
				if len(b) < 1 {
					return 0, bad
				}
				b, frame = b[1:], frame+size
			case 2: // compressed
				if size > int64(len(b)) {
					return 0, bad
				}
				b, frame = b[size:], frame+128<<10
			default:
				return 0, bad
			}
			if total+frame > limit {
				return total + frame, nil
			}
		}
		if fhd&0x04 != 0 { // content checksum
			if len(b) < 4 {
				return 0, bad
			}
			b = b[4:]
		}
		total += max(frame, fcs)
	}
	return total, nil
}

// lz4Size is what the LZ4 block b decompresses to, walking its sequences; it fails on
// every block a decoder rejects whatever its output room (a reader that grows its output
// until decoding succeeds would grow it without end), and stops past limit.
func lz4Size(b []byte, limit int64) (int64, error) {
	bad := fmt.Errorf("corrupt lz4 page")
	ext := func(i int, n int64) (int, int64, error) { // a length's extension bytes
		for {
			if i >= len(b) {
				return i, n, bad
			}
			x := b[i]
			i++
			n += int64(x)
			if x != 0xFF || n > limit {
				return i, n, nil
			}
		}
	}
	var out int64
	for i := 0; i < len(b); {
		token := b[i]
		i++
		lit := int64(token >> 4)
		var err error
		if lit == 15 {
			if i, lit, err = ext(i, lit); err != nil {
				return 0, err
			}
		}
		if lit > int64(len(b)-i) {
			return 0, bad
		}
		i += int(lit)
		out += lit
		if i == len(b) && token&0xF == 0 {
			break // the last sequence holds literals only
		}
		if i+2 > len(b) {
			return 0, bad
		}
		offset := int64(binary.LittleEndian.Uint16(b[i:]))
		i += 2
		if offset == 0 || offset > out {
			return 0, bad
		}
		match := int64(token & 0xF)
		if match == 15 {
			if i, match, err = ext(i, match); err != nil {
				return 0, err
			}
		}
		out += match + 4
		if out > limit {
			return out, nil
		}
	}
	return out, nil
}

// Thrift compact protocol types.
const (
	tTrue   = 1
	tFalse  = 2
	tI8     = 3
	tI16    = 4
	tI32    = 5
	tI64    = 6
	tDouble = 7
	tBinary = 8
	tList   = 9
	tSet    = 10
	tMap    = 11
	tStruct = 12
	tUUID   = 13
)

// maxDepth bounds the nesting of Thrift values (Parquet's own go a few levels deep).
const maxDepth = 32

// compact reads Thrift's compact protocol from b, never trusting a count or a length the
// bytes cannot hold: every element of a container takes at least one byte. budget is what
// a decoder of the containers read may allocate, left; spending past it fails with a
// boundError.
type compact struct {
	b      []byte
	off    int
	depth  int
	budget int64
}

var errThrift = fmt.Errorf("corrupt thrift encoding")

func (c *compact) byte1() (byte, error) {
	if c.off >= len(c.b) {
		return 0, errThrift
	}
	c.off++
	return c.b[c.off-1], nil
}

func (c *compact) uvarint() (uint64, error) {
	v, n := binary.Uvarint(c.b[c.off:])
	if n <= 0 {
		return 0, errThrift
	}
	c.off += n
	return v, nil
}

func (c *compact) i32(t byte) (int32, error) {
	if t != tI32 {
		return 0, c.skip(t, false) // another type: the reader rejects or ignores it
	}
	v, err := c.uvarint()
	if err != nil || v > 1<<32-1 {
		return 0, errThrift
	}
	return int32(uint32(v)>>1) ^ -int32(v&1), nil
}

// fields reads the fields of a struct, calling fn with each field's id and type; fn reads
// or skips the value.
func (c *compact) fields(fn func(id int16, t byte) error) error {
	if c.depth++; c.depth > maxDepth {
		return errThrift
	}
	defer func() { c.depth-- }()
	var id int16
	for {
		h, err := c.byte1()
		if err != nil {
			return err
		}
		if h == 0 {
			return nil
		}
		if d := h >> 4; d != 0 {
			id += int16(d)
		} else {
			v, err := c.uvarint()
			if err != nil || v > 1<<16-1 {
				return errThrift
			}
			id = int16(uint16(v)>>1) ^ -int16(v&1)
		}
		if err := fn(id, h&0x0F); err != nil {
			return err
		}
	}
}

// nested reads a struct value of type t with fields.
func (c *compact) nested(t byte, fn func(id int16, t byte) error) error {
	if t != tStruct {
		return c.skip(t, false)
	}
	return c.fields(fn)
}

// spend charges n elements of type t to the budget.
func (c *compact) spend(n int64, t byte) error {
	size := int64(8)
	switch t {
	case tStruct, tList, tSet, tMap:
		size = footerElement
	case tBinary:
		size = 24
	}
	if c.budget -= n * size; c.budget < 0 {
		return &boundError{what: "thrift metadata", bound: "decoding"}
	}
	return nil
}

// skip reads past one value of type t (inList: an element of a container, where booleans
// take a byte).
func (c *compact) skip(t byte, inList bool) error {
	switch t {
	case tTrue, tFalse:
		if inList {
			_, err := c.byte1()
			return err
		}
		return nil
	case tI8:
		_, err := c.byte1()
		return err
	case tI16, tI32, tI64:
		_, err := c.uvarint()
		return err
	case tDouble, tUUID:
		n := 8
		if t == tUUID {
			n = 16
		}
		if len(c.b)-c.off < n {
			return errThrift
		}
		c.off += n
		return nil
	case tBinary:
		n, err := c.uvarint()
		if err != nil || n > uint64(len(c.b)-c.off) {
			return errThrift
		}
		c.off += int(n)
		return nil
	case tStruct:
		return c.fields(func(_ int16, t byte) error { return c.skip(t, false) })
	case tList, tSet:
		h, err := c.byte1()
		if err != nil {
			return err
		}
		n, et := uint64(h>>4), h&0x0F
		if n == 15 {
			if n, err = c.uvarint(); err != nil {
				return err
			}
		}
		return c.elements(n, et, 0)
	case tMap:
		n, err := c.uvarint()
		if err != nil || n == 0 {
			return err
		}
		kv, err := c.byte1()
		if err != nil {
			return err
		}
		return c.elements(n, kv>>4, kv&0x0F)
	}
	return errThrift
}

// elements reads n elements of type et (with vt, map values of that type after each).
func (c *compact) elements(n uint64, et, vt byte) error {
	per := uint64(1)
	if vt != 0 {
		per = 2
	}
	if n > uint64(len(c.b)-c.off)/per {
		return errThrift
	}
	if err := c.spend(int64(n), et); err != nil {
		return err
	}
	if vt != 0 {
		if err := c.spend(int64(n), vt); err != nil {
			return err
		}
	}
	if c.depth++; c.depth > maxDepth {
		return errThrift
	}
	defer func() { c.depth-- }()
	for range n {
		if err := c.skip(et, true); err != nil {
			return err
		}
		if vt != 0 {
			if err := c.skip(vt, true); err != nil {
				return err
			}
		}
	}
	return nil
}
