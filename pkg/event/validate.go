package event

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/iskorotkov/avro/v2"
)

// Bounds on a record body checked before it reaches the avro decoder.
const (
	// maxItems bounds the items of one array or map. A record that fits a Kafka message
	// (1 MiB by default) has fewer: every item of our schemas takes at least one byte.
	maxItems = 1 << 20
	// maxDepth bounds nesting, in case a schema ever becomes recursive.
	maxDepth = 64
)

var errShort = errors.New("body ends early")

// validate checks that body is exactly one well-formed datum of schema: every length and
// block count fits the bytes present, every enum and union index is in range, and nothing is
// left over. The avro decoder trusts those counts (a few bytes claiming 2^40 items make it
// allocate until the process dies, a negative one corrupts the slice it fills) and reports a
// body that ends early as success, so Decode calls validate first.
func validate(schema avro.Schema, body []byte) error {
	v := validator{b: body}
	if err := v.datum(schema, 0); err != nil {
		return err
	}
	if len(v.b) != 0 {
		return fmt.Errorf("%d trailing bytes", len(v.b))
	}
	return nil
}

type validator struct{ b []byte }

func (v *validator) long() (int64, error) {
	x, n := binary.Varint(v.b)
	if n <= 0 {
		if n == 0 {
			return 0, errShort
		}
		return 0, errors.New("long overflows 64 bits")
	}
	v.b = v.b[n:]
	return x, nil
}

func (v *validator) skip(n int64) error {
	if n < 0 || n > int64(len(v.b)) {
		return errShort
	}
	v.b = v.b[n:]
	return nil
}

// index reads a long that must lie in [0, n).
func (v *validator) index(n int, what string) error {
	i, err := v.long()
	if err != nil {
		return err
	}
	if i < 0 || i >= int64(n) {
		return fmt.Errorf("%s index %d out of range", what, i)
	}
	return nil
}

func (v *validator) datum(s avro.Schema, depth int) error {
	if depth > maxDepth {
		return errors.New("nested too deep")
	}
	switch s := s.(type) {
	case *avro.RefSchema:
		return v.datum(s.Schema(), depth)
	case *avro.PrimitiveSchema:
		return v.primitive(s.Type())
	case *avro.NullSchema:
		return nil
	case *avro.RecordSchema:
		for _, f := range s.Fields() {
			if err := v.datum(f.Type(), depth+1); err != nil {
				return fmt.Errorf("%s: %w", f.Name(), err)
			}
		}
		return nil
	case *avro.EnumSchema:
		return v.index(len(s.Symbols()), "enum")
	case *avro.FixedSchema:
		return v.skip(int64(s.Size()))
	case *avro.UnionSchema:
		i, err := v.long()
		if err != nil {
			return err
		}
		if i < 0 || i >= int64(len(s.Types())) {
			return fmt.Errorf("union index %d out of range", i)
		}
		return v.datum(s.Types()[i], depth+1)
	case *avro.ArraySchema:
		return v.blocks(depth, func() error { return v.datum(s.Items(), depth+1) })
	case *avro.MapSchema:
		return v.blocks(depth, func() error {
			if err := v.primitive(avro.String); err != nil {
				return err
			}
			return v.datum(s.Values(), depth+1)
		})
	}
	return fmt.Errorf("unsupported schema %s", s.Type())
}

func (v *validator) primitive(t avro.Type) error {
	switch t {
	case avro.Null:
		return nil
	case avro.Boolean:
		if len(v.b) == 0 {
			return errShort
		}
		if v.b[0] > 1 {
			return fmt.Errorf("boolean byte %d", v.b[0])
		}
		v.b = v.b[1:]
		return nil
	case avro.Int:
		x, err := v.long()
		if err == nil && (x < math.MinInt32 || x > math.MaxInt32) {
			err = errors.New("int overflows 32 bits")
		}
		return err
	case avro.Long:
		_, err := v.long()
		return err
	case avro.Float:
		return v.skip(4)
	case avro.Double:
		return v.skip(8)
	case avro.String, avro.Bytes:
		n, err := v.long()
		if err != nil {
			return err
		}
		return v.skip(n)
	}
	return fmt.Errorf("unsupported type %s", t)
}

// blocks walks the blocks of an array or map, calling item once per item.
func (v *validator) blocks(depth int, item func() error) error {
	total := int64(0)
	for {
		n, err := v.long()
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		size := int64(-1) // the block's byte size, when the writer gave it
		if n < 0 {
			if n == math.MinInt64 {
				return errors.New("block count overflows")
			}
			n = -n
			if size, err = v.long(); err != nil {
				return err
			}
			if size < 0 || size > int64(len(v.b)) {
				return errShort
			}
		}
		if n > maxItems-total {
			return fmt.Errorf("more than %d items", maxItems)
		}
		total += n
		start := len(v.b)
		for ; n > 0; n-- {
			if err := item(); err != nil {
				return err
			}
		}
		// A decoder skipping the block jumps size bytes: they must be the items.
		if size >= 0 && int64(start-len(v.b)) != size {
			return fmt.Errorf("block size %d is not its items' %d bytes", size, start-len(v.b))
		}
	}
}
