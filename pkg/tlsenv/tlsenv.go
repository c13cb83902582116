// Package tlsenv reads a client's TLS settings from two environment variables: one that
// turns TLS on with the system's roots, one naming a PEM bundle to trust instead (which
// turns TLS on too). Broker and store clients share it so that every client says TLS the
// same way.
package tlsenv

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// FromEnv returns the TLS configuration that $on ("true") and $caFile describe, or nil for
// plaintext when neither is set. Errors name the variable at fault.
func FromEnv(on, caFile string) (*tls.Config, error) {
	ca := os.Getenv(caFile)
	if os.Getenv(on) != "true" && ca == "" {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca == "" {
		return c, nil
	}
	pem, err := os.ReadFile(ca)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", caFile, err)
	}
	c.RootCAs = x509.NewCertPool()
	if !c.RootCAs.AppendCertsFromPEM(pem) {
		return nil, errors.New(caFile + " holds no PEM certificate")
	}
	return c, nil
}
