package datasetstore

import (
	"encoding/binary"
	"errors"
	"slices"
)

// A tally lets the next rewrite of a version this process wrote build the written
// version's summary from the rows it drops alone, rather than from every row it keeps. For
// each set of the version's summary (subject values, session values, mention tokens) it
// counts, per pseudonym prefix, how many times the version's rows contribute the prefix,
// as collector.row collects a row. A CSV or TSV filter keeps a subset of the rows, byte for
// byte, so the written version's sets are the old ones without the prefixes whose counts
// the dropped rows bring to zero. A tally holds no raw value, only prefixes, which the
// summary stores anyway. It is kept with the version's row index (rowindex.go), and a
// rewrite takes it for its own use (summaries.takeTally).
type tally struct {
	sets   [3][]byte // the version's summary sets, sorted 8-byte prefixes
	counts [3]map[uint64]int32
}

// size is how many prefixes t counts.
func (t *tally) size() int {
	if t == nil {
		return 0
	}
	return len(t.counts[0]) + len(t.counts[1]) + len(t.counts[2])
}

var errNotTallied = errors.New("the dropped rows are not rows of the tallied version")

// minus returns the tally of the version a filter of t's version wrote, given the prefixes
// of the values of the rows it dropped, each with its count (summaries.prefixSets); t is
// spent. A prefix t does not count, or counts fewer times, is errNotTallied.
func (t *tally) minus(ps [3][]uint64, ns [3][]int32) (*tally, error) {
	for k := range ps {
		var zero []uint64
		for i, p := range ps[k] {
			switch n := t.counts[k][p] - ns[k][i]; {
			case n < 0 || ns[k][i] <= 0:
				return nil, errNotTallied
			case n == 0:
				delete(t.counts[k], p)
				zero = append(zero, p)
			default:
				t.counts[k][p] = n
			}
		}
		set, ok := without(t.sets[k], zero)
		if !ok {
			return nil, errNotTallied
		}
		t.sets[k] = set
	}
	return t, nil
}

// without returns a copy of the sorted set without the prefixes of zero, every one of which
// it must hold (false otherwise); with zero empty it returns set itself, which is never
// modified.
func without(set []byte, zero []uint64) ([]byte, bool) {
	if len(zero) == 0 {
		return set, true
	}
	slices.Sort(zero)
	if len(set) < 8*len(zero) {
		return nil, false
	}
	out := make([]byte, 0, len(set)-8*len(zero))
	z, run := 0, 0 // the next prefix of zero, the start of the run of set to keep
	for i := 0; i < len(set) && z < len(zero); i += 8 {
		if binary.BigEndian.Uint64(set[i:]) == zero[z] {
			out = append(out, set[run:i]...)
			run, z = i+8, z+1
		}
	}
	return append(out, set[run:]...), z == len(zero)
}
