package auditlog

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/integrity"
	"github.com/lethe-erasure/lethe/pkg/retry"
)

// ChainLabel is the use of the chain key (integrity.Ring): chain MACs are made with the
// key HKDF-SHA-256 derives from it under this label.
const ChainLabel = "lethe receipt chain v1"

// ChainMAC returns the keyed MAC of a chain record whose hash is hash: the id of k's
// current key and the lower-case hex HMAC-SHA-256, under the key derived for ChainLabel,
// of hash's hex text. The hash covers the record and, through prev_hash, every record
// before it, so the MAC of a chain's head vouches for the whole chain.
func ChainMAC(k *integrity.Ring, hash string) (keyID, mac string) {
	id, sum := k.Sum(ChainLabel, []byte(hash))
	return id, hex.EncodeToString(sum)
}

// CheckChainMAC verifies mac, made under the key keyID, for a record whose hash is hash.
// It fails with integrity.ErrUnknownKey, integrity.ErrMismatch, or integrity.ErrUnsigned
// when the record carries no MAC.
func CheckChainMAC(k *integrity.Ring, keyID, mac, hash string) error {
	if keyID == "" && mac == "" {
		return integrity.ErrUnsigned
	}
	sum, err := hex.DecodeString(mac)
	if err != nil || len(sum) != 32 {
		return fmt.Errorf("%w: chain_mac is not 64 hex digits", integrity.ErrMismatch)
	}
	return k.Check(ChainLabel, keyID, []byte(hash), sum)
}

// Chain links receipts and addenda into the tenants' chains of Store and verifies them.
// The zero Key links and verifies as earlier versions did: by SHA-256 alone, which a
// writer of the audit table can recompute for a chain it rebuilt.
//
// With Key, every record linked carries ChainKeyID and ChainMAC (ChainMAC), and before a
// record is linked after the tenant's head, the head's MAC, if it has one, must verify
// under Key: a head whose MAC does not (altered, forged, or made under a key id the ring
// lacks) is never built upon; linking fails with a permanent error wrapping
// ErrChainBroken. A head without a MAC (a chain begun before chain keys) is extended, and
// Unkeyed, when set, is told. Verify with Key also requires the head's MAC.
type Chain struct {
	Store Store
	Key   *integrity.Ring
	// Unkeyed is called, when set, each time a record is linked after a head that carries
	// no MAC. It must not block.
	Unkeyed func(tenant string, headSeq int64)
	// Heads, when set, keeps the heads this process linked, so that Issue need not read
	// them (HeadCache).
	Heads *HeadCache
}

// HeadMAC is what linking needs of a tenant's head: its seq and hash, and the chain key
// id and MAC of the record it names (empty when it has none).
type HeadMAC struct {
	Seq        int64
	Hash       string
	KeyID, MAC string
}

// headMAC is h as HeadMAC.
func headMAC(h Head) HeadMAC {
	hm := HeadMAC{Seq: h.Seq, Hash: h.Hash, KeyID: h.Receipt.ChainKeyID, MAC: h.Receipt.ChainMAC}
	if h.Addendum != nil {
		hm.KeyID, hm.MAC = h.Addendum.ChainKeyID, h.Addendum.ChainMAC
	}
	return hm
}

// admit checks that a record may be linked after head h of tenant (see Chain) and returns
// the chain key id and MAC of a record whose hash is hash: empty without a Key.
func (c Chain) admit(tenant string, h HeadMAC, hash string) (keyID, mac string, err error) {
	if c.Key == nil {
		return "", "", nil
	}
	if h.Seq > 0 {
		switch err := CheckChainMAC(c.Key, h.KeyID, h.MAC, h.Hash); {
		case errors.Is(err, integrity.ErrUnsigned):
			if c.Unkeyed != nil {
				c.Unkeyed(tenant, h.Seq)
			}
		case err != nil:
			return "", "", retry.Permanent(fmt.Errorf("%w: tenant %s: the head at seq %d fails its chain MAC (%v): refusing to link after it",
				ErrChainBroken, tenant, h.Seq, err))
		}
	}
	keyID, mac = ChainMAC(c.Key, hash)
	return keyID, mac, nil
}

// sealReceipt is the seal a Linker calls for r: it admits the head and MACs r.
func (c Chain) sealReceipt(h HeadMAC, r *event.Receipt) error {
	var err error
	r.ChainKeyID, r.ChainMAC, err = c.admit(r.TenantID, h, r.Hash)
	return err
}

// Verified is what Chain.Verify found of an intact chain.
type Verified struct {
	Records int // receipts and addenda, the pending head's record included
	// Keyed counts the records whose chain MAC verified (Key set); the others carry none.
	Keyed int
	// LastUnkeyed is the seq of the last record without a chain MAC, 0 when every record
	// has one or no Key was given. Every record up to the head is vouched for by the
	// head's MAC all the same (its hash covers them): a rising LastUnkeyed between two
	// checks means records were linked without the key.
	LastUnkeyed int64
}

// verifyMACs checks the chain MACs of links, in chain order, the last of which is the
// chain's head, under c.Key: each MAC present must verify, and the head must carry one.
func (c Chain) verifyMACs(tenant string, links []link) (Verified, error) {
	v := Verified{Records: len(links)}
	for i, l := range links {
		keyID, mac := l.chainMAC()
		err := CheckChainMAC(c.Key, keyID, mac, l.hash())
		switch {
		case err == nil:
			v.Keyed++
		case errors.Is(err, integrity.ErrUnsigned) && i < len(links)-1:
			v.LastUnkeyed = l.seq
		case errors.Is(err, integrity.ErrUnsigned):
			return v, fmt.Errorf("%w: tenant %s: the head, %s of request %s at seq %d, carries no chain MAC (linked without the chain key, or its MAC was removed)",
				ErrChainBroken, tenant, l.what(), l.requestID(), l.seq)
		default:
			return v, fmt.Errorf("%w: seq %d: %s of request %s fails its chain MAC (%v): rebuilt or forged", ErrChainBroken, l.seq, l.what(), l.requestID(), err)
		}
	}
	return v, nil
}

// Verify checks the tenant's chain as VerifyChain does and, with c.Key, its chain MACs:
// every MAC a record carries must verify under c.Key, and the head's record (the pending
// one included) must carry one. A chain rebuilt by recomputing plain hashes, a record
// whose MAC was removed at the head, or a MAC made with another key then fails with
// ErrChainBroken. Without c.Key the MACs are not read.
func (c Chain) Verify(ctx context.Context, tenant string) (Verified, error) {
	links, head, err := chainLinks(ctx, c.Store, tenant)
	if err != nil {
		return Verified{}, err
	}
	err = verifyLinks(links, head, tenant)
	pending := errors.Is(err, ErrChainPending)
	if err != nil && !pending {
		return Verified{}, err
	}
	if pending {
		links = append(links, headLink(head))
	}
	if c.Key == nil {
		return Verified{Records: len(links)}, err
	}
	v, merr := c.verifyMACs(tenant, links)
	if merr != nil {
		return v, merr
	}
	return v, err
}
