package edgediff

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/qdrant/go-client/qdrant"
)

// double is a payload double: it is written with a fraction or an exponent, so that the
// oracle reads 4.0 as a double, not as the integer 4.
type double float64

func (d double) MarshalJSON() ([]byte, error) {
	s := strconv.FormatFloat(float64(d), 'g', -1, 64)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return []byte(s), nil
}

// valueJSON is v in JSON, integers and doubles kept apart.
func valueJSON(v *qdrant.Value) any {
	switch k := v.GetKind().(type) {
	case *qdrant.Value_NullValue, nil:
		return nil
	case *qdrant.Value_BoolValue:
		return k.BoolValue
	case *qdrant.Value_IntegerValue:
		return k.IntegerValue
	case *qdrant.Value_DoubleValue:
		return double(k.DoubleValue)
	case *qdrant.Value_StringValue:
		return k.StringValue
	case *qdrant.Value_ListValue:
		out := make([]any, 0, len(k.ListValue.GetValues()))
		for _, e := range k.ListValue.GetValues() {
			out = append(out, valueJSON(e))
		}
		return out
	case *qdrant.Value_StructValue:
		return payloadJSON(k.StructValue.GetFields())
	}
	return nil
}

func payloadJSON(p map[string]*qdrant.Value) map[string]any {
	out := make(map[string]any, len(p))
	for k, v := range p {
		out[k] = valueJSON(v)
	}
	return out
}

// payloadAny is a payload of an answer, for comparison; nil when the answer has none.
func payloadAny(p map[string]*qdrant.Value) map[string]any {
	if p == nil {
		return nil
	}
	return payloadJSON(p)
}

// number is a JSON number as compared: its kind (integer or double) and value.
type number struct {
	integer bool
	text    string
	f       float64
}

func numberOf(v any) (number, bool) {
	switch n := v.(type) {
	case int64:
		return number{integer: true, text: strconv.FormatInt(n, 10)}, true
	case double:
		return number{f: float64(n)}, true
	case json.Number:
		s := n.String()
		if strings.ContainsAny(s, ".eE") {
			f, _ := n.Float64()
			return number{f: f}, true
		}
		return number{integer: true, text: s}, true
	}
	return number{}, false
}

// sameJSON compares two payload values: integers equal integers, doubles equal doubles.
func sameJSON(a, b any) bool {
	if na, ok := numberOf(a); ok {
		nb, ok := numberOf(b)
		return ok && na == nb
	}
	switch x := a.(type) {
	case nil:
		return b == nil
	case bool, string:
		return a == b
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !sameJSON(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !sameJSON(v, w) {
				return false
			}
		}
		return true
	}
	return false
}

// filterJSON is f in the oracle's JSON form: the gRPC filter, with a Condition that has
// nothing set left out as Qdrant's gRPC API leaves it out.
func filterJSON(f *qdrant.Filter) map[string]any {
	if f == nil {
		return nil
	}
	out := map[string]any{}
	for name, cs := range map[string][]*qdrant.Condition{"must": f.GetMust(), "should": f.GetShould(), "must_not": f.GetMustNot()} {
		if l := conditionsJSON(cs); len(l) > 0 {
			out[name] = l
		}
	}
	if ms := f.GetMinShould(); ms != nil {
		out["min_should"] = map[string]any{"conditions": conditionsJSON(ms.GetConditions()), "min_count": ms.GetMinCount()}
	}
	return out
}

func conditionsJSON(cs []*qdrant.Condition) []any {
	out := []any{}
	for _, c := range cs {
		if j := conditionJSON(c); j != nil {
			out = append(out, j)
		}
	}
	return out
}

func conditionJSON(c *qdrant.Condition) map[string]any {
	switch v := c.GetConditionOneOf().(type) {
	case *qdrant.Condition_Field:
		return map[string]any{"field": fieldJSON(v.Field)}
	case *qdrant.Condition_IsEmpty:
		return map[string]any{"is_empty": v.IsEmpty.GetKey()}
	case *qdrant.Condition_IsNull:
		return map[string]any{"is_null": v.IsNull.GetKey()}
	case *qdrant.Condition_HasId:
		ids := []any{}
		for _, id := range v.HasId.GetHasId() {
			ids = append(ids, pointID(id))
		}
		return map[string]any{"has_id": ids}
	case *qdrant.Condition_Filter:
		return map[string]any{"filter": filterJSON(v.Filter)}
	case *qdrant.Condition_Nested:
		return map[string]any{"nested": map[string]any{"key": v.Nested.GetKey(), "filter": filterJSON(v.Nested.GetFilter())}}
	case *qdrant.Condition_HasVector:
		return map[string]any{"has_vector": v.HasVector.GetHasVector()}
	}
	return nil
}

func fieldJSON(fc *qdrant.FieldCondition) map[string]any {
	out := map[string]any{"key": fc.GetKey()}
	if m := fc.GetMatch(); m != nil {
		var mj map[string]any
		switch v := m.GetMatchValue().(type) {
		case *qdrant.Match_Keyword:
			mj = map[string]any{"keyword": v.Keyword}
		case *qdrant.Match_Integer:
			mj = map[string]any{"integer": v.Integer}
		case *qdrant.Match_Boolean:
			mj = map[string]any{"boolean": v.Boolean}
		case *qdrant.Match_Text:
			mj = map[string]any{"text": v.Text}
		case *qdrant.Match_TextAny:
			mj = map[string]any{"text_any": v.TextAny}
		case *qdrant.Match_Phrase:
			mj = map[string]any{"phrase": v.Phrase}
		case *qdrant.Match_Keywords:
			mj = map[string]any{"keywords": nonNil(v.Keywords.GetStrings())}
		case *qdrant.Match_Integers:
			mj = map[string]any{"integers": nonNil(v.Integers.GetIntegers())}
		case *qdrant.Match_ExceptKeywords:
			mj = map[string]any{"except_keywords": nonNil(v.ExceptKeywords.GetStrings())}
		case *qdrant.Match_ExceptIntegers:
			mj = map[string]any{"except_integers": nonNil(v.ExceptIntegers.GetIntegers())}
		}
		if mj != nil {
			out["match"] = mj
		}
	}
	if r := fc.GetRange(); r != nil {
		rj := map[string]any{}
		for name, p := range map[string]*float64{"gt": r.Gt, "gte": r.Gte, "lt": r.Lt, "lte": r.Lte} {
			if p != nil {
				rj[name] = double(*p)
			}
		}
		out["range"] = rj
	}
	if vc := fc.GetValuesCount(); vc != nil {
		vj := map[string]any{}
		for name, p := range map[string]*uint64{"gt": vc.Gt, "gte": vc.Gte, "lt": vc.Lt, "lte": vc.Lte} {
			if p != nil {
				vj[name] = *p
			}
		}
		out["values_count"] = vj
	}
	if fc.IsEmpty != nil {
		out["is_empty"] = fc.GetIsEmpty()
	}
	if fc.IsNull != nil {
		out["is_null"] = fc.GetIsNull()
	}
	return out
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
