package pii

import (
	"fmt"

	"go.uber.org/zap/zapcore"
)

// Core wraps c so that every log message and every string, error and Stringer field
// passes through Mask before it is written.
func Core(c zapcore.Core) zapcore.Core { return maskCore{c} }

type maskCore struct{ zapcore.Core }

func (c maskCore) With(fs []zapcore.Field) zapcore.Core { return maskCore{c.Core.With(maskFields(fs))} }

func (c maskCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c maskCore) Write(e zapcore.Entry, fs []zapcore.Field) error {
	e.Message = Mask(e.Message)
	return c.Core.Write(e, maskFields(fs))
}

func maskFields(fs []zapcore.Field) []zapcore.Field {
	out := make([]zapcore.Field, len(fs))
	for i, f := range fs {
		switch f.Type {
		case zapcore.StringType:
			f.String = Mask(f.String)
		case zapcore.ErrorType:
			if err, ok := f.Interface.(error); ok && err != nil {
				f = zapcore.Field{Key: f.Key, Type: zapcore.StringType, String: Mask(err.Error())}
			}
		case zapcore.StringerType:
			if s, ok := f.Interface.(fmt.Stringer); ok && s != nil {
				f = zapcore.Field{Key: f.Key, Type: zapcore.StringType, String: Mask(s.String())}
			}
		}
		out[i] = f
	}
	return out
}
