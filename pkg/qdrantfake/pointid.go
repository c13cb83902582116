package qdrantfake

import (
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/qdrant/go-client/qdrant"
)

// pointKey is a comparable point id. Qdrant orders ids as it orders its ExtendedPointId
// enum: every numeric id before every UUID, numbers by value, UUIDs by their 16 bytes.
type pointKey struct {
	uuid   bool
	num    uint64
	hi, lo uint64
}

func (k pointKey) less(o pointKey) bool {
	if k.uuid != o.uuid {
		return !k.uuid
	}
	if !k.uuid {
		return k.num < o.num
	}
	if k.hi != o.hi {
		return k.hi < o.hi
	}
	return k.lo < o.lo
}

// id returns k as a protobuf id; a UUID in the lower-case hyphenated form Qdrant returns.
func (k pointKey) id() *qdrant.PointId {
	if !k.uuid {
		return qdrant.NewIDNum(k.num)
	}
	var b [16]byte
	for i := 0; i < 8; i++ {
		b[i] = byte(k.hi >> (56 - 8*i))
		b[8+i] = byte(k.lo >> (56 - 8*i))
	}
	h := hex.EncodeToString(b[:])
	return qdrant.NewIDUUID(h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32])
}

// keyOf converts a protobuf id. It accepts the UUID spellings Qdrant accepts (hyphenated,
// simple, braced, urn:uuid:, any case) and rejects everything else.
func keyOf(id *qdrant.PointId) (pointKey, error) {
	switch v := id.GetPointIdOptions().(type) {
	case *qdrant.PointId_Num:
		return pointKey{num: v.Num}, nil
	case *qdrant.PointId_Uuid:
		b, err := parseUUID(v.Uuid)
		if err != nil {
			return pointKey{}, err
		}
		k := pointKey{uuid: true}
		for i := 0; i < 8; i++ {
			k.hi = k.hi<<8 | uint64(b[i])
			k.lo = k.lo<<8 | uint64(b[8+i])
		}
		return k, nil
	default:
		return pointKey{}, fmt.Errorf("Wrong input: Unable to parse PointId: no id given")
	}
}

func parseUUID(s string) ([16]byte, error) {
	var out [16]byte
	t := strings.TrimPrefix(strings.ToLower(s), "urn:uuid:")
	if strings.HasPrefix(t, "{") && strings.HasSuffix(t, "}") {
		t = t[1 : len(t)-1]
	}
	if len(t) == 36 {
		if t[8] != '-' || t[13] != '-' || t[18] != '-' || t[23] != '-' {
			return out, fmt.Errorf("Wrong input: Unable to parse UUID: %q", s)
		}
		t = t[0:8] + t[9:13] + t[14:18] + t[19:23] + t[24:]
	}
	if len(t) != 32 {
		return out, fmt.Errorf("Wrong input: Unable to parse UUID: %q", s)
	}
	if _, err := hex.Decode(out[:], []byte(t)); err != nil {
		return out, fmt.Errorf("Wrong input: Unable to parse UUID: %q", s)
	}
	return out, nil
}
