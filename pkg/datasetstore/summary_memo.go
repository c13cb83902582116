package datasetstore

import (
	"encoding/binary"
	"hash/maphash"
	"sync"
)

// prefixMemo remembers the pseudonym prefixes summaries computed, so that rebuilding the
// summary of an object after a rewrite computes a keyed hash only for the values the
// object did not hold before. It holds no value: each is known by two 64-bit hashes
// under seeds drawn when the process starts and never shown (a wrong prefix would need
// two values colliding in 128 bits), mapped to its 8-byte pseudonym prefix, which
// summaries store anyway. It holds at most maxMemo values and starts again empty when full.
type prefixMemo struct {
	seeds [2]maphash.Seed
	mu    sync.Mutex
	m     map[[2]uint64]uint64
}

const maxMemo = 1 << 18

func newPrefixMemo() *prefixMemo {
	return &prefixMemo{seeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}, m: map[[2]uint64]uint64{}}
}

// prefixes returns prefix(tenant, v) of every value v of vals, with vals[v] at the same
// index of ns, computing only the prefixes the memo does not hold; kind tells apart prefix
// functions (for one kind, one function).
func (p *prefixMemo) prefixes(kind byte, tenant string, vals map[string]int32, prefix func(tenant, v string) uint64) (out []uint64, ns []int32) {
	type value struct {
		v   string
		key [2]uint64
	}
	vs := make([]value, 0, len(vals))
	ns = make([]int32, 0, len(vals))
	for v, n := range vals {
		vs = append(vs, value{v, [2]uint64{p.hash(0, kind, tenant, v), p.hash(1, kind, tenant, v)}})
		ns = append(ns, n)
	}
	out = make([]uint64, len(vs))
	known := make([]bool, len(vs))
	p.mu.Lock()
	for i, x := range vs {
		out[i], known[i] = p.m[x.key]
	}
	p.mu.Unlock()
	for i, x := range vs {
		if !known[i] {
			out[i] = prefix(tenant, x.v)
		}
	}
	p.mu.Lock()
	if len(p.m)+len(vs) > maxMemo {
		clear(p.m)
	}
	for i, x := range vs {
		p.m[x.key] = out[i]
	}
	p.mu.Unlock()
	return out, ns
}

func (p *prefixMemo) hash(seed int, kind byte, tenant, v string) uint64 {
	var h maphash.Hash
	h.SetSeed(p.seeds[seed])
	h.WriteByte(kind)
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(tenant)))
	h.Write(n[:])
	h.WriteString(tenant)
	h.WriteString(v)
	return h.Sum64()
}
