package chaos

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy forwards TCP connections from a fixed loopback port to a store. Down makes the
// store unreachable for its clients (the listener closes and open connections are cut:
// new connections are refused) without touching the store's data; Up listens again on the
// same port. It is how the harness simulates a store outage.
//
// SetLatency delays what clients send by a fixed time, as a store in another zone or a
// managed service would: each chunk read from a client is written to the store at its
// arrival time plus the latency, so a request/response round trip takes at least that
// long while pipelined requests on one connection, and separate connections, are delayed
// side by side rather than one after the other. Answers from the store are not delayed.
type Proxy struct {
	Port   int
	Target string

	latency atomic.Int64 // time.Duration added to client-to-store chunks

	mu    sync.Mutex
	l     net.Listener
	conns map[net.Conn]bool

	relay *httputil.ReverseProxy // NewHTTPProxy's: one store connection per request
	srv   *http.Server           // while up, with relay
}

// NewProxy listens on a free port and forwards to target.
func NewProxy(target string) (*Proxy, error) {
	p := &Proxy{Target: target, conns: map[net.Conn]bool{}}
	return p, p.Up()
}

// NewHTTPProxy is NewProxy for an HTTP/1.1 store that closes its connection after every
// answer, as moto's server does (Connection: close), where the service it stands in for
// keeps connections open (S3). It keeps its clients' connections open and opens one to the
// store per request, so a client pays for connections as it would against the service.
// The latency delays each request; Down closes the clients' connections too.
func NewHTTPProxy(target string) (*Proxy, error) {
	p := &Proxy{Target: target, conns: map[net.Conn]bool{}}
	store := &url.URL{Scheme: "http", Host: target}
	p.relay = &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(store)
		r.Out.Host = r.In.Host // signed by the client
	}}
	return p, p.Up()
}

// ServeHTTP relays one request of an HTTP proxy after its latency.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if d := p.Latency(); d > 0 {
		time.Sleep(d)
	}
	p.relay.ServeHTTP(w, r)
}

// Addr is the proxy's address.
func (p *Proxy) Addr() string { return fmt.Sprintf("127.0.0.1:%d", p.Port) }

// SetLatency sets the one-way delay added to every chunk a client sends to the store from
// now on (0: none). It is safe to call while connections are open.
func (p *Proxy) SetLatency(d time.Duration) { p.latency.Store(int64(max(d, 0))) }

// Latency is the current one-way delay.
func (p *Proxy) Latency() time.Duration { return time.Duration(p.latency.Load()) }

// Up starts listening (again); it is a no-op while up.
func (p *Proxy) Up() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.l != nil {
		return nil
	}
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p.Port))
	if err != nil {
		return fmt.Errorf("chaos: proxy listen: %w", err)
	}
	p.l = l
	p.Port = l.Addr().(*net.TCPAddr).Port
	if p.relay != nil {
		p.srv = &http.Server{Handler: p, ReadHeaderTimeout: time.Minute}
		go func(srv *http.Server) { _ = srv.Serve(l) }(p.srv)
		return nil
	}
	go p.accept(l)
	return nil
}

// Down closes the listener and every open connection.
func (p *Proxy) Down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.l != nil {
		p.l.Close()
		p.l = nil
	}
	if p.srv != nil {
		p.srv.Close() // the listener and every client connection
		p.srv = nil
	}
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

func (p *Proxy) accept(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go p.forward(c)
	}
}

func (p *Proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.l == nil {
		return false
	}
	for _, c := range cs {
		p.conns[c] = true
	}
	return true
}

func (p *Proxy) forward(c net.Conn) {
	t, err := net.Dial("tcp", p.Target)
	if err != nil {
		c.Close()
		return
	}
	if !p.track(c, t) {
		c.Close()
		t.Close()
		return
	}
	done := make(chan struct{}, 2)
	go func() { delayCopy(t, c, p.Latency); done <- struct{}{} }() // a proxy: either side closing ends it
	go func() { _, _ = io.Copy(c, t); done <- struct{}{} }()
	<-done
	c.Close()
	t.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, t)
	p.mu.Unlock()
}

// chunk is bytes read from a client and the time they may be written to the store.
type chunk struct {
	b   []byte
	due time.Time
}

// delayCopy copies src to dst, writing each chunk read from src at its arrival time plus
// latency(): a reader stamps chunks as they arrive and a writer releases them in order, so
// chunks in flight wait out their delays concurrently. It returns when src ends (after
// writing what it read) or a write fails.
func delayCopy(dst io.Writer, src io.Reader, latency func() time.Duration) {
	chunks := make(chan chunk, 1024)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		defer close(chunks)
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				select {
				case chunks <- chunk{b: append([]byte(nil), buf[:n]...), due: time.Now().Add(latency())}:
				case <-stop:
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range chunks {
		if d := time.Until(c.due); d > 0 {
			time.Sleep(d)
		}
		if _, err := dst.Write(c.b); err != nil {
			return
		}
	}
}
