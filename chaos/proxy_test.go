package chaos

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// echoServer echoes every connection's bytes back until the test ends.
func echoServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	return l.Addr().String()
}

// TestProxyLatency checks the injected delay through a real TCP echo server: a round trip
// takes at least the latency, and the bytes of many concurrent connections, each with
// pipelined messages, come back intact and in order. Only lower bounds on time are
// asserted; how long pipelined messages take in all is logged.
func TestProxyLatency(t *testing.T) {
	const latency = 40 * time.Millisecond
	p, err := NewProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Down)
	p.SetLatency(latency)
	if p.Latency() != latency {
		t.Fatalf("Latency() = %s, want %s", p.Latency(), latency)
	}

	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	if _, err := c.Write([]byte("ping\n")); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || line != "ping\n" {
		t.Fatalf("echo = %q, %v", line, err)
	}
	if rt := time.Since(start); rt < latency {
		t.Fatalf("round trip took %s, less than the injected %s", rt, latency)
	}

	const conns, msgs = 16, 50
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	start = time.Now()
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- pipelined(p.Addr(), i, msgs)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	elapsed := time.Since(start)
	if elapsed < latency {
		t.Fatalf("%d connections of %d pipelined messages came back in %s, less than the injected %s", conns, msgs, elapsed, latency)
	}
	t.Logf("%d connections × %d pipelined messages echoed in %s with %s injected (serialised would be ≥ %s)",
		conns, msgs, elapsed.Round(time.Millisecond), latency, time.Duration(msgs)*latency)

	p.SetLatency(0)
	if p.Latency() != 0 {
		t.Fatalf("Latency() = %s after SetLatency(0)", p.Latency())
	}
	if err := pipelined(p.Addr(), 0, 3); err != nil {
		t.Fatalf("without latency: %v", err)
	}
}

// pipelined writes msgs numbered lines of varied length on one connection without
// waiting for answers, then reads them back and checks each is intact and in order.
func pipelined(addr string, conn, msgs int) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	want := make([]string, msgs)
	go func() {
		for i := range msgs {
			want[i] = fmt.Sprintf("conn %d msg %d %0*d\n", conn, i, 1+i*97%4000, i)
		}
		w := bufio.NewWriter(c)
		for _, m := range want {
			w.WriteString(m)
			if conn%2 == 0 {
				w.Flush() // a chunk per message on even connections, a few large ones on odd
			}
		}
		w.Flush()
	}()
	r := bufio.NewReader(c)
	c.SetReadDeadline(time.Now().Add(time.Minute))
	for i := range msgs {
		got, err := r.ReadString('\n')
		if err != nil {
			return fmt.Errorf("conn %d: reading message %d: %w", conn, i, err)
		}
		if exp := fmt.Sprintf("conn %d msg %d %0*d\n", conn, i, 1+i*97%4000, i); got != exp {
			return fmt.Errorf("conn %d: message %d = %.40q…, want %.40q…", conn, i, got, exp)
		}
	}
	return nil
}

// An HTTP proxy keeps its client's connection open in front of a store that closes every
// connection, forwards requests (the Host the client signed included) after the latency,
// and cuts its clients off while down.
func TestHTTPProxyKeepsConnections(t *testing.T) {
	const latency = 20 * time.Millisecond
	var storeConns atomic.Int64
	store := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %s", r.Method, r.Host, body)
	}))
	store.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			storeConns.Add(1)
		}
	}
	store.Start()
	defer store.Close()
	p, err := NewHTTPProxy(store.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Down)
	p.SetLatency(latency)
	var fresh atomic.Int64
	trace := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) {
		if !i.Reused {
			fresh.Add(1)
		}
	}})
	cl := &http.Client{Transport: &http.Transport{}}
	call := func(i int) error {
		req, _ := http.NewRequestWithContext(trace, http.MethodPut, "http://"+p.Addr()+"/b/k", strings.NewReader(fmt.Sprint(i)))
		req.Host = "bucket.example"
		start := time.Now()
		resp, err := cl.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		got, _ := io.ReadAll(resp.Body)
		if want := fmt.Sprintf("PUT bucket.example %d", i); string(got) != want {
			return fmt.Errorf("answer %q, want %q", got, want)
		}
		if rt := time.Since(start); rt < latency {
			return fmt.Errorf("round trip took %s, less than the injected %s", rt, latency)
		}
		return nil
	}
	for i := range 10 {
		if err := call(i); err != nil {
			t.Fatal(err)
		}
	}
	if fresh.Load() != 1 || storeConns.Load() != 10 {
		t.Fatalf("10 requests: the client opened %d connections (want 1), the store saw %d (want 10)", fresh.Load(), storeConns.Load())
	}
	p.Down()
	if err := call(10); err == nil {
		t.Fatal("a request through a proxy that is down succeeded")
	}
	if err := p.Up(); err != nil {
		t.Fatal(err)
	}
	if err := call(11); err != nil {
		t.Fatal(err)
	}
}
