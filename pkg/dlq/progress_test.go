package dlq

import (
	"slices"
	"testing"
)

func TestProgress(t *testing.T) {
	// Offsets 10..20 exist; a filter passes over 11 and 15.
	p := &progress{base: 10}
	steps := []struct {
		replay   int64
		base     int64
		metadata string
	}{
		{10, 11, "v1:"},
		{12, 11, "v1:12"},
		{14, 11, "v1:12,14"},
		{13, 11, "v1:12-14"},
		{17, 11, "v1:12-14,17"},
		{16, 11, "v1:12-14,16-17"},
		{11, 15, "v1:16-17"}, // the first hole filled: base jumps over the replayed run
		{15, 18, "v1:"},
		{20, 18, "v1:20"},
	}
	for _, st := range steps {
		before := p.metadata()
		next := p.with(st.replay)
		if p.metadata() != before {
			t.Fatalf("with(%d) changed its receiver", st.replay)
		}
		p = next
		if p.base != st.base || p.metadata() != st.metadata {
			t.Fatalf("after replaying %d: base %d %q, want %d %q", st.replay, p.base, p.metadata(), st.base, st.metadata)
		}
		back, err := parseProgress(p.base, p.metadata())
		if err != nil || back.base != p.base || !slices.Equal(back.ranges, p.ranges) {
			t.Fatalf("parse(%d, %q) = %+v, %v; want %+v", p.base, p.metadata(), back, err, p)
		}
	}
	for o, want := range map[int64]bool{9: true, 17: true, 18: false, 19: false, 20: true, 21: false} {
		if p.done(o) != want {
			t.Errorf("done(%d) = %v, want %v", o, !want, want)
		}
	}

	// Records 18 and 19 were removed by retention: the next run starts at 20.
	p.advanceTo(20)
	if p.base != 21 || p.metadata() != "v1:" {
		t.Errorf("advanceTo(20) = base %d %q, want 21 with nothing above", p.base, p.metadata())
	}
}

func TestParseProgressRejectsMalformed(t *testing.T) {
	// "" is what another client's commit without metadata looks like: not Replay's progress.
	for _, meta := range []string{"", "v2:1", "v1:x", "v1:5", "v1:10", "v1:12,11", "v1:14-12", "v1:12-14,13", "v1:,"} {
		if p, err := parseProgress(10, meta); err == nil {
			t.Errorf("parseProgress(10, %q) = %+v, want an error", meta, p)
		}
	}
}

func TestProgressFull(t *testing.T) {
	p := &progress{base: 0}
	for o := int64(1_000_000); len(p.metadata()) <= maxProgressBytes; o += 2 {
		p = p.with(o) // every other record passed over: nothing merges
	}
	if len(p.ranges) < 400 {
		t.Errorf("metadata full after %d scattered records, want room for hundreds", len(p.ranges))
	}
}
