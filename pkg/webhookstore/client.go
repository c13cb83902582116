package webhookstore

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"

	"go.uber.org/zap"
)

// ClientFromEnv returns the HTTP client webhook stores send with, and logs its settings on
// log, which may be nil:
//
//	LETHE_WEBHOOK_CA_FILE   a PEM bundle to trust instead of the system roots   none
//
// TLS 1.2 is the minimum. Each store's own timeout bounds every exchange.
func ClientFromEnv(log *zap.Logger) (*http.Client, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	ca := os.Getenv("LETHE_WEBHOOK_CA_FILE")
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("webhookstore: LETHE_WEBHOOK_CA_FILE: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, errors.New("webhookstore: LETHE_WEBHOOK_CA_FILE holds no PEM certificate")
		}
	}
	if log != nil {
		log.Info("webhook client", zap.String("webhook_ca_file", ca))
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = cfg
	return &http.Client{Transport: tr}, nil
}
