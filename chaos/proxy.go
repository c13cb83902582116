package chaos

import (
	"fmt"
	"io"
	"net"
	"sync"
)

// Proxy forwards TCP connections from a fixed loopback port to a store. Down makes the
// store unreachable for its clients (the listener closes and open connections are cut:
// new connections are refused) without touching the store's data; Up listens again on the
// same port. It is how the harness simulates a store outage.
type Proxy struct {
	Port   int
	Target string

	mu    sync.Mutex
	l     net.Listener
	conns map[net.Conn]bool
}

// NewProxy listens on a free port and forwards to target.
func NewProxy(target string) (*Proxy, error) {
	p := &Proxy{Target: target, conns: map[net.Conn]bool{}}
	return p, p.Up()
}

// Addr is the proxy's address.
func (p *Proxy) Addr() string { return fmt.Sprintf("127.0.0.1:%d", p.Port) }

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
	go func() { _, _ = io.Copy(t, c); done <- struct{}{} }() // a proxy: either side closing ends it
	go func() { _, _ = io.Copy(c, t); done <- struct{}{} }()
	<-done
	c.Close()
	t.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, t)
	p.mu.Unlock()
}
