package receiver

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Header names of a signed request (docs/webhook-contract.md).
const (
	HeaderTimestamp = "Lethe-Timestamp"
	HeaderSignature = "Lethe-Signature"
	HeaderRequestID = "Lethe-Request-Id"
)

// Sign returns the value of the Lethe-Signature header for a request sent at timestamp
// (decimal Unix seconds, exactly as in the Lethe-Timestamp header) with payload (the body
// of a POST, the request target of a GET): "v1=" and the lower-case hex of
// HMAC-SHA-256(secret, timestamp + "." + payload).
func Sign(secret []byte, timestamp string, payload []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(timestamp))
	mac.Write([]byte{'.'})
	mac.Write(payload)
	return "v1=" + hex.EncodeToString(mac.Sum(nil))
}

// Errors of CheckSignature; a receiver answers each with 401.
var (
	ErrNoSignature  = errors.New("no v1 signature")
	ErrBadSignature = errors.New("signature does not match")
	ErrTimestamp    = errors.New("timestamp missing, malformed or outside the tolerance")
)

// CheckSignature checks the Lethe-Timestamp and Lethe-Signature header values of a request
// with payload against any of secrets (several during a rotation) at time now: the timestamp
// must lie within tolerance of now, and one of the header's comma-separated v1= values must
// equal Sign under one of the secrets (compared in constant time). It returns the matching
// signature, the key of the replay cache.
func CheckSignature(secrets [][]byte, timestamp, header string, payload []byte, now time.Time, tolerance time.Duration) (string, error) {
	ts, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil || strconv.FormatInt(ts, 10) != timestamp {
		return "", ErrTimestamp
	}
	if d := now.Sub(time.Unix(ts, 0)); d > tolerance || d < -tolerance {
		return "", ErrTimestamp
	}
	var found bool
	for _, sig := range strings.Split(header, ",") {
		sig = strings.TrimSpace(sig)
		if !strings.HasPrefix(sig, "v1=") {
			continue
		}
		found = true
		for _, s := range secrets {
			if hmac.Equal([]byte(sig), []byte(Sign(s, timestamp, payload))) {
				return sig, nil
			}
		}
	}
	if !found {
		return "", ErrNoSignature
	}
	return "", ErrBadSignature
}
