package keylock

import (
	"testing"
	"time"
)

// Only holders of the same key wait for each other, and a key no one holds or waits for
// is forgotten.
func TestKeyedLocksSerializeOneKeyOnly(t *testing.T) {
	var k Locks
	unlockA := k.Lock("er_a")
	otherDone := make(chan struct{})
	go func() {
		k.Lock("er_b")()
		close(otherDone)
	}()
	select {
	case <-otherDone:
	case <-time.After(5 * time.Second):
		t.Fatal("a lock of another key waited for the held one")
	}
	sameDone := make(chan struct{})
	go func() {
		k.Lock("er_a")()
		close(sameDone)
	}()
	select {
	case <-sameDone:
		t.Fatal("a second lock of the held key did not wait")
	case <-time.After(50 * time.Millisecond):
	}
	unlockA()
	select {
	case <-sameDone:
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting lock did not get the key once it was unlocked")
	}
	if n := k.held(); n != 0 {
		t.Errorf("%d keys kept after every lock was released", n)
	}
}
