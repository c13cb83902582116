package edgediff_test

import (
	"github.com/qdrant/go-client/qdrant"
	"google.golang.org/protobuf/proto"
)

// shrink reduces f, one condition at a time, to a filter that still makes diverges true;
// it returns f itself when no reduction does.
func shrink(f *qdrant.Filter, diverges func(*qdrant.Filter) bool) *qdrant.Filter {
	for {
		smaller := false
		for _, r := range reductions(f) {
			if diverges(r) {
				f, smaller = r, true
				break
			}
		}
		if !smaller {
			return f
		}
	}
}

// reductions are the filters f becomes with one condition left out, at any depth.
func reductions(f *qdrant.Filter) []*qdrant.Filter {
	var out []*qdrant.Filter
	lists := func(g *qdrant.Filter) []*[]*qdrant.Condition {
		l := []*[]*qdrant.Condition{&g.Must, &g.Should, &g.MustNot}
		if g.MinShould != nil {
			l = append(l, &g.MinShould.Conditions)
		}
		return l
	}
	for li := range lists(f) {
		n := len(*lists(f)[li])
		for i := range n {
			g := proto.Clone(f).(*qdrant.Filter)
			l := lists(g)[li]
			*l = append((*l)[:i:i], (*l)[i+1:]...)
			out = append(out, g)
			var inner *qdrant.Filter
			switch c := (*lists(f)[li])[i].GetConditionOneOf().(type) {
			case *qdrant.Condition_Filter:
				inner = c.Filter
			case *qdrant.Condition_Nested:
				inner = c.Nested.GetFilter()
			}
			if inner == nil {
				continue
			}
			for _, r := range reductions(inner) {
				g := proto.Clone(f).(*qdrant.Filter)
				switch c := (*lists(g)[li])[i].GetConditionOneOf().(type) {
				case *qdrant.Condition_Filter:
					c.Filter = r
				case *qdrant.Condition_Nested:
					c.Nested.Filter = r
				}
				out = append(out, g)
			}
		}
	}
	if f.MinShould != nil {
		g := proto.Clone(f).(*qdrant.Filter)
		g.MinShould = nil
		out = append(out, g)
	}
	return out
}
