// Command webhook-receiver is the reference processor of Lethe's webhook erasure contract
// (docs/webhook-contract.md): it serves package receiver over HTTPS on a file-backed store.
//
//	webhook-receiver -addr :8443 -cert cert.pem -key key.pem -secret-file secret -data items.json
//	webhook-receiver -self-signed localhost,webhook-receiver -cert-out /certs/receiver.pem ...
//
// The shared secret comes from -secret-file or, without it, $LETHE_WEBHOOK_SECRET (at least
// 32 bytes). -self-signed makes a certificate for the given host names at start and writes it
// (PEM) to -cert-out for Lethe to trust (LETHE_WEBHOOK_CA_FILE). -async answers 202 and lets
// Lethe poll.
package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"log"
	"math/big"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/lethe-erasure/lethe/examples/webhook-receiver/receiver"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "webhook-receiver:", err)
		os.Exit(1)
	}
}

func run() error {
	addr := flag.String("addr", "127.0.0.1:8443", "listen address")
	certFile := flag.String("cert", "", "TLS certificate (PEM)")
	keyFile := flag.String("key", "", "TLS private key (PEM)")
	selfSigned := flag.String("self-signed", "", "comma-separated host names: serve a certificate made at start")
	certOut := flag.String("cert-out", "", "with -self-signed: write the certificate (PEM) here")
	secretFile := flag.String("secret-file", "", "file holding the shared secret (default: $LETHE_WEBHOOK_SECRET)")
	data := flag.String("data", "", "JSON file of the store's items (default: in memory)")
	async := flag.Bool("async", false, "answer 202 and let Lethe poll the status URL")
	flag.Parse()

	secret := []byte(os.Getenv("LETHE_WEBHOOK_SECRET"))
	if *secretFile != "" {
		b, err := os.ReadFile(*secretFile)
		if err != nil {
			return err
		}
		secret = []byte(strings.TrimRight(string(b), "\r\n"))
	}
	if len(secret) < 32 {
		return errors.New("the shared secret must hold at least 32 bytes")
	}
	store := receiver.NewStore()
	if *data != "" {
		var err error
		if store, err = receiver.OpenFile(*data); err != nil {
			return err
		}
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	switch {
	case *selfSigned != "":
		cert, pemBytes, err := makeCert(strings.Split(*selfSigned, ","))
		if err != nil {
			return err
		}
		if *certOut != "" {
			if err := os.WriteFile(*certOut, pemBytes, 0o644); err != nil {
				return err
			}
		}
		cfg.Certificates = []tls.Certificate{cert}
	case *certFile != "" && *keyFile != "":
		cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
		if err != nil {
			return err
		}
		cfg.Certificates = []tls.Certificate{cert}
	default:
		return errors.New("give -cert and -key, or -self-signed: the receiver serves HTTPS only")
	}
	srv := &http.Server{
		Addr:              *addr,
		Handler:           &receiver.Handler{Secrets: [][]byte{secret}, Store: store, Async: *async},
		TLSConfig:         cfg,
		ReadHeaderTimeout: 10 * time.Second,
	}
	log.Printf("webhook-receiver listening on https://%s%s", *addr, receiver.ErasuresPath)
	return srv.ListenAndServeTLS("", "")
}

// makeCert returns a self-signed ECDSA certificate for hosts, valid for a year, and its PEM.
func makeCert(hosts []string) (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: hosts[0]},
		DNSNames:              hosts,
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pemBytes, nil
}
