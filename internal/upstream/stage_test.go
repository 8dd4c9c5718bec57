package upstream_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/switchboard-mcp/switchboard/internal/upstream"
)

// TestStageCommitDiscard: a staged server runs next to the one it replaces
// without reporting anything; Discard stops it and leaves the running one
// alone; Commit swaps it in, stops the old process, and reports its state
// and discovery.
func TestStageCommitDiscard(t *testing.T) {
	rec := newRecorder()
	m := newManager(t, rec, nil, nil)
	ctx := context.Background()
	if err := m.Add(fakeStdio("fake", "basic")); err != nil {
		t.Fatal(err)
	}
	if err := m.Connect(ctx, "fake"); err != nil {
		t.Fatal(err)
	}
	old, _ := m.Status("fake")
	reports := func() (int, int) {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return len(rec.transitions), len(rec.discoveries)
	}
	t0, d0 := reports()

	// A staged server that cannot start fails and changes nothing.
	if _, err := m.Stage(ctx, fakeStdio("fake", "exit"), true); err == nil {
		t.Fatal("staging a server that exits at start succeeded")
	}
	// One that starts, discarded: nothing reported, the old one serves.
	st, err := m.Stage(ctx, fakeStdio("fake", "basic"), true)
	if err != nil {
		t.Fatal(err)
	}
	st.Discard()
	st.Discard() // idempotent
	if tn, dn := reports(); tn != t0 || dn != d0 {
		t.Errorf("staged servers reported %d transitions and %d discoveries", tn-t0, dn-d0)
	}
	if cur, _ := m.Status("fake"); cur.PID != old.PID || cur.State != upstream.StateConnected {
		t.Errorf("after Discard: %s pid %d, want the old CONNECTED pid %d", cur.State, cur.PID, old.PID)
	}

	// Committed: the new process serves, the old one is gone.
	st, err = m.Stage(ctx, fakeStdio("fake", "basic"), true)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Commit(ctx, st); err != nil {
		t.Fatal(err)
	}
	cur, _ := m.Status("fake")
	if cur.PID == old.PID || cur.State != upstream.StateConnected {
		t.Errorf("after Commit: %s pid %d, want CONNECTED with a new pid (old %d)", cur.State, cur.PID, old.PID)
	}
	rec.waitFor(t, "the committed server's discovery", func() bool { return len(rec.discoveriesOf("fake")) == d0+1 })
	steps := rec.steps("fake")
	if len(steps) == 0 || steps[len(steps)-1] != "DISCONNECTED>CONNECTED" {
		t.Errorf("transitions = %v, want the committed server reported last as DISCONNECTED>CONNECTED", steps)
	}
	res, err := m.CallTool(ctx, "fake", &mcp.CallToolParams{Name: "echo", Arguments: json.RawMessage(`{"text":"after commit"}`)})
	if err != nil || res.IsError {
		t.Errorf("call after Commit: %v %+v", err, res)
	}
	st.Discard() // a no-op after Commit
	if cur2, _ := m.Status("fake"); cur2.PID != cur.PID {
		t.Error("Discard after Commit stopped the committed server")
	}
}
