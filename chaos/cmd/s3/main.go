// Command s3 serves gofakes3 over HTTP on a fixed loopback port, in memory, with the
// named buckets created and versioning enabled on them. Stopping or killing it loses every
// object: killing it is a store outage with data loss, not a crash test.
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

func main() {
	port := flag.Int("port", 9000, "HTTP listen port on 127.0.0.1")
	buckets := flag.String("buckets", "lethe-datasets", "comma-separated buckets to create, versioned")
	flag.Parse()
	backend := s3mem.New()
	for _, b := range strings.Split(*buckets, ",") {
		if b == "" {
			continue
		}
		if err := backend.CreateBucket(b); err != nil {
			fmt.Fprintf(os.Stderr, "s3: create bucket: %v\n", err)
			os.Exit(1)
		}
		if err := backend.SetVersioningConfiguration(b, gofakes3.VersioningConfiguration{Status: gofakes3.VersioningEnabled}); err != nil {
			fmt.Fprintf(os.Stderr, "s3: enable versioning: %v\n", err)
			os.Exit(1)
		}
	}
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *port))
	if err != nil {
		fmt.Fprintf(os.Stderr, "s3: %v\n", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "s3 (gofakes3, versioned %s): listening on %s\n", *buckets, l.Addr())
	srv := &http.Server{Handler: gofakes3.New(backend).Server(), ReadHeaderTimeout: 5 * time.Second}
	if err := srv.Serve(l); err != nil {
		fmt.Fprintf(os.Stderr, "s3: %v\n", err)
		os.Exit(1)
	}
}
