package inventory

import (
	"fmt"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// sessionNames are the field names a suggested entry lists as session fields.
var sessionNames = []string{"session_id", "thread_id", "conversation_id"}

// SessionLike reports whether the last part of the field path f names a session:
// session_id, thread_id or conversation_id, ignoring case, '-' and ' '.
func SessionLike(f string) bool {
	last := f[strings.LastIndexByte(f, '.')+1:]
	last = strings.NewReplacer("-", "_", " ", "_").Replace(strings.ToLower(strings.TrimSpace(last)))
	return slices.Contains(sessionNames, last)
}

// UniqueName returns name, cut to an entry name's length, or it with the first suffix -2,
// -3, ... that taken does not hold, and marks it taken.
func UniqueName(name string, taken map[string]bool) string {
	name = strings.TrimRight(name[:min(len(name), 56)], "-_")
	n := name
	for i := 2; taken[n]; i++ {
		n = fmt.Sprintf("%s-%d", name, i)
	}
	taken[n] = true
	return n
}

// EntryYAML writes an entry of the stores list as the inventory file does: name, kind and
// locators, a mapping node (so that it may carry comments).
func EntryYAML(name, kind string, locators *yaml.Node) string {
	doc := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{
		YAMLString("name"), YAMLString(name), YAMLString("kind"), YAMLString(kind), YAMLString("locators"), locators,
	}}
	var b strings.Builder
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		panic(err) // a tree of strings always encodes
	}
	_ = enc.Close()
	return b.String()
}

// YAMLString is a string node.
func YAMLString(v string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v}
}

// YAMLList is a flow sequence of strings: [a, b].
func YAMLList(vs []string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
	for _, v := range vs {
		n.Content = append(n.Content, YAMLString(v))
	}
	return n
}
