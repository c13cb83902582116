package webhookstore

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/retry"
)

// Kind is the inventory kind this package serves.
const Kind = "webhook"

// Locators are the locators of an inventory store of kind "webhook": the processor's
// erasure endpoint, where its shared secret lives (never the secret itself), which
// identifiers it receives, and the timing of requests and polls. Durations are Go duration
// strings ("30s", "10m").
type Locators struct {
	// URL is the processor's erasure endpoint: https, or http to a loopback address only
	// when InsecureHTTP is set (tests). It holds no placeholder: identifiers travel in the
	// signed body, never in the URL.
	URL          string `yaml:"url"`
	InsecureHTTP bool   `yaml:"insecure_http"`
	// SecretEnv or SecretFile (exactly one) names the environment variable or the file
	// holding the shared secret (at least 32 bytes; a file's trailing newline is dropped).
	// It is read for every request, so a rotated file takes effect without a restart.
	SecretEnv  string `yaml:"secret_env"`
	SecretFile string `yaml:"secret_file"`
	// Identifiers are those sent: "subject" (the customer id), "subject_hash" (its keyed
	// pseudonym), "sessions". Default: subject and sessions.
	Identifiers []string `yaml:"identifiers"`
	// Timeout bounds one HTTP exchange (default 30s); Attempts is how many times one request
	// is sent, under the same request id, on transient failures (default 3).
	Timeout  time.Duration `yaml:"timeout"`
	Attempts int           `yaml:"attempts"`
	// PollInterval and PollMaxInterval are the base and cap of the backoff between status
	// polls after a 202 (defaults 1s and 30s); Deadline bounds the whole wait (default 10m).
	PollInterval    time.Duration `yaml:"poll_interval"`
	PollMaxInterval time.Duration `yaml:"poll_max_interval"`
	Deadline        time.Duration `yaml:"deadline"`
}

// Identifier names of Locators.Identifiers.
const (
	IdentSubject     = "subject"
	IdentSubjectHash = "subject_hash"
	IdentSessions    = "sessions"
)

// minSecret is the shortest shared secret accepted, as for the pseudonym key.
const minSecret = 32

var _ deletion.Validator = (*Store)(nil)

// Validate checks the locators of st and that its secret is readable and long enough
// where the deleter runs; it sends nothing.
func (s *Store) Validate(st inventory.Entry) error {
	l, err := LocatorsOf(st)
	if err != nil {
		return err
	}
	_, err = l.secret(st.Name)
	return err
}

// Validate checks the locators of st without a Store and without reading the secret, for
// tools that check an inventory away from the deleter's environment.
func Validate(st inventory.Entry) error {
	_, err := LocatorsOf(st)
	return err
}

// LocatorsOf decodes and checks the locators of st and fills in the defaults; its errors
// are permanent and name the field at fault.
func LocatorsOf(st inventory.Entry) (Locators, error) {
	l, err := inventory.DecodeChecked(st, "webhook: store", Locators.check)
	if err != nil {
		return Locators{}, err
	}
	if len(l.Identifiers) == 0 {
		l.Identifiers = []string{IdentSubject, IdentSessions}
	}
	l.Timeout = or(l.Timeout, 30*time.Second)
	l.PollInterval = or(l.PollInterval, time.Second)
	l.PollMaxInterval = or(l.PollMaxInterval, 30*time.Second)
	l.Deadline = or(l.Deadline, 10*time.Minute)
	if l.Attempts == 0 {
		l.Attempts = 3
	}
	return l, nil
}

func or(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

func (l Locators) check() error {
	var errs []error
	if err := checkURL(l.URL, l.InsecureHTTP); err != nil {
		errs = append(errs, fmt.Errorf("locators.url: %w", err))
	}
	if (l.SecretEnv == "") == (l.SecretFile == "") {
		errs = append(errs, errors.New("locators: set exactly one of secret_env, secret_file"))
	}
	for _, id := range l.Identifiers {
		if !slices.Contains([]string{IdentSubject, IdentSubjectHash, IdentSessions}, id) {
			errs = append(errs, fmt.Errorf("locators.identifiers: %q is not one of subject, subject_hash, sessions", id))
		}
	}
	for name, d := range map[string]time.Duration{"timeout": l.Timeout, "poll_interval": l.PollInterval, "poll_max_interval": l.PollMaxInterval, "deadline": l.Deadline} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("locators.%s: negative duration %s", name, d))
		}
	}
	if l.Attempts < 0 {
		errs = append(errs, fmt.Errorf("locators.attempts: negative (%d)", l.Attempts))
	}
	return errors.Join(errs...)
}

// checkURL accepts an absolute https URL without user information, fragment or
// placeholder, or an http one to a loopback host when insecure is set.
func checkURL(raw string, insecure bool) error {
	if raw == "" {
		return errors.New("empty")
	}
	if err := inventory.CheckTemplate(raw); err != nil {
		return err
	}
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	switch {
	case u.Host == "":
		return fmt.Errorf("%q is not an absolute URL", raw)
	case u.User != nil:
		return errors.New("holds user information: put credentials in the secret, not the URL")
	case u.Fragment != "":
		return errors.New("holds a fragment")
	case u.Scheme == "https":
		return nil
	case u.Scheme != "http":
		return fmt.Errorf("scheme %q: want https", u.Scheme)
	case !insecure:
		return errors.New("http:// is refused: use https (insecure_http allows a loopback address for tests)")
	case !loopback(u.Hostname()):
		return fmt.Errorf("http:// to %q: insecure_http allows loopback addresses only", u.Hostname())
	}
	return nil
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// secret reads the store's shared secret; its errors are permanent and never hold it.
func (l Locators) secret(store string) ([]byte, error) {
	var b []byte
	var where string
	if l.SecretEnv != "" {
		where = "locators.secret_env: $" + l.SecretEnv
		b = []byte(os.Getenv(l.SecretEnv))
	} else {
		where = "locators.secret_file: " + l.SecretFile
		var err error
		if b, err = os.ReadFile(l.SecretFile); err != nil {
			return nil, retry.Permanent(fmt.Errorf("webhook: store %q: %s: %w", store, where, err))
		}
		b = []byte(strings.TrimRight(string(b), "\r\n"))
	}
	if len(b) < minSecret {
		return nil, retry.Permanent(fmt.Errorf("webhook: store %q: %s holds %d bytes, want a secret of at least %d", store, where, len(b), minSecret))
	}
	return b, nil
}
