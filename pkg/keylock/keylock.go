// Package keylock serializes, within a process, the work on one key (an object, a request,
// a tenant) without making work on other keys wait: one mutex per key in use.
package keylock

import "sync"

// Locks is one mutex per key in use, dropped when no one holds or waits for it. The zero
// value is ready to use; it is safe for concurrent use and must not be copied.
type Locks struct {
	mu    sync.Mutex
	locks map[string]*lock
}

type lock struct {
	sync.Mutex
	users int // holding or waiting
}

// Lock locks key's mutex, waiting while another holder has it, and returns the function
// that unlocks it.
func (k *Locks) Lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*lock{}
	}
	l := k.locks[key]
	if l == nil {
		l = &lock{}
		k.locks[key] = l
	}
	l.users++
	k.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		k.mu.Lock()
		if l.users--; l.users == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
}

// held is how many keys are held or waited for.
func (k *Locks) held() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.locks)
}
