package awsclient_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/awsclient"
)

// Two rounds of 64 concurrent calls: the second reuses the connections the first opened,
// where the SDK's default client (10 idle per host) opens most of them again.
func TestConnectionsAreReused(t *testing.T) {
	var opened atomic.Int64
	var release atomic.Pointer[chan struct{}]
	var arrived sync.WaitGroup
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Done()
		<-*release.Load() // every call of a round is in flight at once
		io.WriteString(w, "ok")
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c := awsclient.HTTPClient()
	const calls = 64
	round := func() int64 {
		before := opened.Load()
		gate := make(chan struct{})
		release.Store(&gate)
		arrived.Add(calls)
		var wg sync.WaitGroup
		for range calls {
			wg.Go(func() {
				resp, err := c.Do(must(http.NewRequest(http.MethodGet, srv.URL, nil)))
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			})
		}
		arrived.Wait()
		close(gate)
		wg.Wait()
		return opened.Load() - before
	}
	if n := round(); n != calls {
		t.Fatalf("first round opened %d connections, want %d", n, calls)
	}
	if n := round(); n > 0 {
		t.Errorf("second round opened %d connections, want none: the first round's were not kept", n)
	}
}

func must(r *http.Request, err error) *http.Request {
	if err != nil {
		panic(err)
	}
	return r
}
