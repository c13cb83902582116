package consumer

import (
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// kgoLogger passes franz-go's informational messages (group joins, syncs, assignments,
// heartbeat errors) and worse to zap. They name topics, partitions, groups and members,
// never record contents.
type kgoLogger struct{ log *zap.Logger }

func (kgoLogger) Level() kgo.LogLevel { return kgo.LogLevelInfo }

func (l kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	fields := make([]zap.Field, 0, len(keyvals)/2)
	for i := 0; i+1 < len(keyvals); i += 2 {
		if k, ok := keyvals[i].(string); ok {
			fields = append(fields, zap.Any(k, keyvals[i+1]))
		}
	}
	switch level {
	case kgo.LogLevelError:
		l.log.Error(msg, fields...)
	case kgo.LogLevelWarn:
		l.log.Warn(msg, fields...)
	case kgo.LogLevelInfo:
		l.log.Info(msg, fields...)
	}
}
