package tlsenv_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lethe-erasure/lethe/pkg/tlsenv"
)

// selfSigned returns a PEM self-signed certificate.
func selfSigned(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "lethe-test"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func TestConfig(t *testing.T) {
	if c, err := tlsenv.Config(false, "", "X_TLS_CA_FILE"); c != nil || err != nil {
		t.Errorf("nothing set: %v, %v; want plaintext", c, err)
	}
	if c, err := tlsenv.Config(true, "", "X_TLS_CA_FILE"); c == nil || err != nil || c.RootCAs != nil {
		t.Errorf("TLS on: %v, %v; want TLS with the system roots", c, err)
	}
	if _, err := tlsenv.Config(false, filepath.Join(t.TempDir(), "missing.pem"), "X_TLS_CA_FILE"); err == nil || !strings.HasPrefix(err.Error(), "X_TLS_CA_FILE: ") {
		t.Errorf("missing CA file: %v", err)
	}
	notPEM := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := tlsenv.Config(false, notPEM, "X_TLS_CA_FILE"); err == nil || !strings.Contains(err.Error(), "holds no PEM certificate") {
		t.Errorf("CA file without a certificate: %v", err)
	}
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, selfSigned(t), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err := tlsenv.Config(false, ca, "X_TLS_CA_FILE"); err != nil || c == nil || c.RootCAs == nil || c.MinVersion != tls.VersionTLS12 {
		t.Errorf("CA file: %v, %v; want TLS 1.2+ trusting it", c, err)
	}
}
