// Package tlsenv builds a client's TLS settings from two declared settings: one that turns
// TLS on with the system's roots, one naming a PEM bundle to trust instead (which turns TLS
// on too). Broker and store clients share it so that every client says TLS the same way.
package tlsenv

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// Config returns the TLS configuration that on and the PEM bundle caFile describe, or nil
// for plaintext when neither is set. caVar names the variable that set caFile; errors
// name it.
func Config(on bool, caFile, caVar string) (*tls.Config, error) {
	if !on && caFile == "" {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile == "" {
		return c, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", caVar, err)
	}
	c.RootCAs = x509.NewCertPool()
	if !c.RootCAs.AppendCertsFromPEM(pem) {
		return nil, errors.New(caVar + " holds no PEM certificate")
	}
	return c, nil
}
