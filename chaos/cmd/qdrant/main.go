// Command qdrant serves the Qdrant emulator (package qdrantfake) over gRPC on a fixed
// loopback port. Its collections live in memory only: stopping or killing it loses them,
// so killing it is a store outage with data loss, not a crash test.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/lethe-erasure/lethe/pkg/qdrantfake"
)

func main() {
	port := flag.Int("port", 6334, "gRPC listen port on 127.0.0.1")
	flag.Parse()
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *port))
	if err != nil {
		fmt.Fprintf(os.Stderr, "qdrant: %v\n", err)
		os.Exit(1)
	}
	s := qdrantfake.New()
	go func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
		<-sig
		s.Close()
	}()
	fmt.Fprintf(os.Stderr, "qdrant emulator: listening on %s\n", l.Addr())
	if err := s.Serve(l); err != nil {
		fmt.Fprintf(os.Stderr, "qdrant: %v\n", err)
		os.Exit(1)
	}
}
