package webhookstore

import (
	"crypto/tls"
	"fmt"
	"net/http"

	"go.uber.org/zap"

	"github.com/lethe-erasure/lethe/pkg/tlsenv"
)

// Settings declare the webhook deleter's HTTP client.
type Settings struct {
	CAFile string `env:"LETHE_WEBHOOK_CA_FILE" doc:"A PEM bundle the webhook deleter trusts instead of the system roots; TLS (1.2 at least) is always on."`
}

// Client returns the HTTP client webhook stores send with, and logs its settings on log,
// which may be nil. TLS (1.2 at least) is always on: there is no variable to turn it off.
// Each store's own timeout bounds every exchange.
func (s Settings) Client(log *zap.Logger) (*http.Client, error) {
	cfg, err := tlsenv.Config(false, s.CAFile, "LETHE_WEBHOOK_CA_FILE")
	if err != nil {
		return nil, fmt.Errorf("webhookstore: %w", err)
	}
	if cfg == nil {
		cfg = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if log != nil {
		log.Info("webhook client", zap.Bool("webhook_private_ca", cfg.RootCAs != nil))
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = cfg
	// one idle connection per erasure a deleter has in hand (LETHE_INFLIGHT_MAX's default),
	// not net/http's 2: a TLS handshake per call otherwise
	tr.MaxIdleConnsPerHost = 256
	return &http.Client{Transport: tr}, nil
}
