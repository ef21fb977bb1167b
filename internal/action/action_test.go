package action

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestParseAndString(t *testing.T) {
	for _, a := range All() {
		got, err := Parse(" "+a.String()+" ", All()...)
		if err != nil || got != a {
			t.Errorf("Parse(%q) = %v, %v", a, got, err)
		}
	}
	if _, err := Parse("tempfail"); !errors.Is(err, ErrUnknown) {
		t.Errorf("tempfail is not a verdict action: %v", err)
	}
	if _, err := Parse("bounce"); err == nil || err.Error() != `unknown action "bounce" (want accept, tag, quarantine or reject)` {
		t.Errorf("Parse(bounce): %v", err)
	}
	if got, _ := Parse("REJECT"); got != Reject {
		t.Errorf("case-insensitive: %v", got)
	}
	if Action(9).String() != "action(9)" || Action(9).Valid() {
		t.Error("out of range")
	}
}

func TestJSON(t *testing.T) {
	b, err := json.Marshal(map[string]Action{"a": Quarantine})
	if err != nil || string(b) != `{"a":"quarantine"}` {
		t.Fatalf("%s %v", b, err)
	}
	var m map[string]Action
	if err := json.Unmarshal([]byte(`{"a":"tempfail"}`), &m); err != nil || m["a"] != Tempfail {
		t.Fatalf("%v %v", m, err)
	}
	if _, err := json.Marshal(Action(7)); err == nil {
		t.Error("invalid action marshaled")
	}
}

func TestOrderAndCap(t *testing.T) {
	if !(Accept < Tag && Tag < Quarantine && Quarantine < Reject) {
		t.Fatal("verdict actions not ordered mildest first")
	}
	tests := []struct{ a, limit, want Action }{
		{Reject, Tag, Tag}, {Tag, Reject, Tag}, {Quarantine, Accept, Accept}, {Accept, Accept, Accept},
	}
	for _, tt := range tests {
		if got := tt.a.Cap(tt.limit); got != tt.want {
			t.Errorf("%v.Cap(%v) = %v", tt.a, tt.limit, got)
		}
	}
}
