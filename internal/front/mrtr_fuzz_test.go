package front

import (
	"strings"
	"testing"
	"time"
)

// FuzzRequestState: whatever a caller sends back as requestState, opening
// it never panics, and only a state this gateway sealed for exactly that
// caller, endpoint, method and name opens.
func FuzzRequestState(f *testing.F) {
	m := newMRTR(nil, time.Minute, "r1")
	good, err := m.seal(inputState{Kind: stateUp, Caller: "key:a", Method: "tools/call", Name: "t", Up: "s"})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good + "x")
	f.Add(strings.ToUpper(good))
	f.Add("")
	f.Add("sb1:abcd:AAAA")
	f.Add(strings.Repeat("A", 1000))
	f.Fuzz(func(t *testing.T, value string) {
		st, err := m.open(value, "", "key:a", "tools/call", "t")
		if err == nil && value != good {
			t.Fatalf("a state not issued by the gateway opened: %q -> %+v", value, st)
		}
		if _, ok := m.peek(value); ok && value != good {
			t.Fatalf("peek opened %q", value)
		}
	})
}
