package pii_test

import (
	"errors"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/lethe-erasure/lethe/pkg/pii"
)

type stringer string

func (s stringer) String() string { return string(s) }

func TestCoreMasksEveryTextField(t *testing.T) {
	obs, logs := observer.New(zapcore.InfoLevel)
	log := zap.New(pii.Core(obs)).With(zap.String("context", "owner anna@example.com"))
	log.Info("mail to bob@example.org failed",
		zap.String("to", "carol@example.net"),
		zap.Error(errors.New("550 mailbox dave@example.com unknown")),
		zap.Stringer("addr", stringer("erin@example.com")),
		zap.String("request_id", "er_0123456789abcdef0123456789abcdef"),
		zap.Int("attempt", 3))
	log.Debug("not enabled: frank@example.com")
	all := logs.All()
	if len(all) != 1 {
		t.Fatalf("%d entries", len(all))
	}
	e := all[0]
	text := e.Message
	for k, v := range e.ContextMap() {
		text += " " + k + "=" + strings.TrimSpace(toString(v))
	}
	for _, raw := range []string{"anna@", "bob@", "carol@", "dave@", "erin@"} {
		if strings.Contains(text, raw) {
			t.Errorf("log keeps %s: %s", raw, text)
		}
	}
	if !strings.Contains(text, "er_0123456789abcdef0123456789abcdef") || e.ContextMap()["attempt"] != int64(3) {
		t.Errorf("unrelated fields changed: %s", text)
	}
}

func toString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return ""
}
