package envelope

import (
	"errors"
	"fmt"
)

// sealedVersion is the first byte of a Sealed in its binary form.
const sealedVersion = 1

// MarshalBinary encodes s as version ‖ len(KEKID) ‖ KEKID ‖ len(Nonce) ‖ Nonce ‖
// Ciphertext, for carrying a Sealed in one bytes field.
func (s Sealed) MarshalBinary() ([]byte, error) {
	if len(s.KEKID) > 255 || len(s.Nonce) > 255 {
		return nil, errors.New("envelope: sealed kek id or nonce too long")
	}
	b := make([]byte, 0, 3+len(s.KEKID)+len(s.Nonce)+len(s.Ciphertext))
	b = append(b, sealedVersion, byte(len(s.KEKID)))
	b = append(b, s.KEKID...)
	b = append(b, byte(len(s.Nonce)))
	b = append(b, s.Nonce...)
	return append(b, s.Ciphertext...), nil
}

// UnmarshalBinary decodes the form MarshalBinary writes; malformed input is ErrCorrupt.
// s does not alias b.
func (s *Sealed) UnmarshalBinary(b []byte) error {
	bad := func(what string) error { return fmt.Errorf("%w: sealed payload: %s", ErrCorrupt, what) }
	if len(b) < 3 || b[0] != sealedVersion {
		return bad("unknown format")
	}
	n := int(b[1])
	if len(b) < 3+n {
		return bad("truncated kek id")
	}
	kid := string(b[2 : 2+n])
	rest := b[2+n:]
	m := int(rest[0])
	if len(rest) < 1+m {
		return bad("truncated nonce")
	}
	*s = Sealed{
		KEKID:      kid,
		Nonce:      append([]byte(nil), rest[1:1+m]...),
		Ciphertext: append([]byte(nil), rest[1+m:]...),
	}
	return nil
}
