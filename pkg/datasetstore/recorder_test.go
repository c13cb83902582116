package datasetstore

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"testing/iotest"
)

// Filtering a CSV far larger than the recorder's array, read in uneven pieces, copies every
// kept row byte for byte: the recorder reuses its array without losing a byte not taken.
func TestRecorderReusesItsArray(t *testing.T) {
	var in, want bytes.Buffer
	in.WriteString("customer_id,text\n")
	want.WriteString("customer_id,text\n")
	dropped := 0
	for i := range 20_000 {
		row := fmt.Sprintf("cust-%d,\"row %d, %s\"\n", i%7, i, strings.Repeat("x", i%300))
		in.WriteString(row)
		if i%7 != 3 {
			want.WriteString(row)
		} else {
			dropped++
		}
	}
	var out bytes.Buffer
	m := newMatcher([]string{"customer_id"}, nil, "cust-3", nil)
	n, err := filter(formatCSV, iotest.HalfReader(&in), &out, m, testLimits)
	if err != nil || n != dropped {
		t.Fatalf("filter = %d rows, %v", n, err)
	}
	if !bytes.Equal(out.Bytes(), want.Bytes()) {
		t.Errorf("output differs from the kept rows (%d bytes, want %d)", out.Len(), want.Len())
	}
}
