package storetest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/internal/store"
)

// testEscalations: an escalation is stored, listed, delivered (once),
// counted when a delivery fails, and acknowledged (once).
func testEscalations(t *testing.T, db *store.DB) {
	ctx := t.Context()
	e := store.Escalation{ID: "esc_1", Event: "call_failed", CorrelationID: "c1", AgentID: "a", Server: "s", Tool: "s.t",
		ErrorCode: "timeout", Error: "timed out", Attempts: 3, CreatedAt: oddTime}
	if err := db.CreateEscalation(ctx, e); err != nil {
		t.Fatal(err)
	}
	later := e
	later.ID, later.CreatedAt, later.Event, later.ApprovalID = "esc_2", oddTime.Add(time.Second), "approval_requested", "apr_1"
	if err := db.CreateEscalation(ctx, later); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateEscalation(ctx, store.Escalation{ID: "esc_1", Event: "x"}); err == nil {
		t.Errorf("a duplicate id was stored")
	}
	ids := func(f store.EscalationFilter) []string {
		t.Helper()
		list, err := db.Escalations(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		out := []string{}
		for _, x := range list {
			out = append(out, x.ID)
		}
		return out
	}
	if diff := cmp.Diff([]string{"esc_2", "esc_1"}, ids(store.EscalationFilter{})); diff != "" {
		t.Errorf("newest first (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"esc_1", "esc_2"}, ids(store.EscalationFilter{Undelivered: true})); diff != "" {
		t.Errorf("undelivered oldest first (-want +got):\n%s", diff)
	}
	if err := db.EscalationDeliveryFailed(ctx, "esc_1", "503"); err != nil {
		t.Fatal(err)
	}
	if err := db.EscalationDelivered(ctx, "esc_1", oddTime.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := db.EscalationDelivered(ctx, "esc_1", oddTime.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	got, err := db.Escalation(ctx, "esc_1")
	want := e
	want.CreatedAt = oddTime.UTC()
	delivered := oddTime.Add(time.Minute).UTC()
	want.DeliveredAt, want.DeliveryAttempts = &delivered, 2
	if err != nil || !cmp.Equal(want, got) {
		t.Errorf("after delivery (-want +got):\n%s %v", cmp.Diff(want, got), err)
	}
	if diff := cmp.Diff([]string{"esc_2"}, ids(store.EscalationFilter{Undelivered: true})); diff != "" {
		t.Errorf("undelivered after a delivery (-want +got):\n%s", diff)
	}
	acked, err := db.AckEscalation(ctx, "esc_2", "ops", oddTime.Add(2*time.Minute))
	if err != nil || acked.AckedBy != "ops" || acked.AckedAt == nil {
		t.Fatalf("ack: %+v %v", acked, err)
	}
	if again, _ := db.AckEscalation(ctx, "esc_2", "other", oddTime.Add(3*time.Minute)); again.AckedBy != "ops" {
		t.Errorf("a second ack replaced the first: %+v", again)
	}
	if diff := cmp.Diff([]string{"esc_1"}, ids(store.EscalationFilter{Unacked: true})); diff != "" {
		t.Errorf("unacked (-want +got):\n%s", diff)
	}
	if _, err := db.AckEscalation(ctx, "esc_none", "ops", oddTime); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ack unknown: %v, want ErrNotFound", err)
	}
}

// testApprovals: a pending approval is found by its call, decided once,
// and its token taken by exactly one of concurrent takers.
func testApprovals(t *testing.T, db *store.DB) {
	ctx := t.Context()
	now := oddTime.UTC()
	a := store.Approval{ID: "apr_1", AgentID: "a", Server: "s", Tool: "t", Name: "s.t", ArgsDigest: "d1", Status: store.ApprovalPending,
		RequestedAt: now, ExpiresAt: now.Add(time.Hour)}
	if err := db.CreateApproval(ctx, a); err != nil {
		t.Fatal(err)
	}
	if got, err := db.OpenApproval(ctx, "a", "s", "t", "d1", now.Add(time.Minute)); err != nil || got.ID != "apr_1" {
		t.Errorf("OpenApproval = %+v, %v", got, err)
	}
	for _, miss := range [][2]string{{"other", "d1"}, {"a", "d2"}} {
		if _, err := db.OpenApproval(ctx, miss[0], "s", "t", miss[1], now); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("OpenApproval(%v) = %v, want ErrNotFound", miss, err)
		}
	}
	if _, err := db.OpenApproval(ctx, "a", "s", "t", "d1", now.Add(2*time.Hour)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an expired approval is open: %v", err)
	}
	if _, err := db.TakeApproval(ctx, "apr_1", now); !errors.Is(err, store.ErrConflict) {
		t.Errorf("took a pending approval: %v", err)
	}
	dec, err := db.DecideApproval(ctx, "apr_1", store.ApprovalApproved, "ops", "ok", "sbt_x", now, now.Add(time.Hour))
	if err != nil || dec.Status != store.ApprovalApproved || dec.DecidedBy != "ops" || dec.TokenSecret != "" {
		t.Fatalf("DecideApproval = %+v, %v", dec, err)
	}
	if _, err := db.DecideApproval(ctx, "apr_1", store.ApprovalDenied, "ops", "", "", now, now); !errors.Is(err, store.ErrConflict) {
		t.Errorf("decided twice: %v", err)
	}
	if _, err := db.DecideApproval(ctx, "apr_none", store.ApprovalDenied, "ops", "", "", now, now); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("decided an unknown approval: %v", err)
	}
	var mu sync.Mutex
	var secrets []string
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			s, err := db.TakeApproval(ctx, "apr_1", now)
			if err == nil {
				mu.Lock()
				secrets = append(secrets, s)
				mu.Unlock()
			} else if !errors.Is(err, store.ErrConflict) {
				t.Errorf("TakeApproval: %v", err)
			}
		})
	}
	wg.Wait()
	if diff := cmp.Diff([]string{"sbt_x"}, secrets); diff != "" {
		t.Errorf("takers (-want +got):\n%s", diff)
	}
	got, _ := db.Approval(ctx, "apr_1")
	if got.Status != store.ApprovalUsed || got.TokenSecret != "" || got.UsedAt == nil {
		t.Errorf("after the take: %+v", got)
	}
	if _, err := db.OpenApproval(ctx, "a", "s", "t", "d1", now); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a used approval is open: %v", err)
	}
	list, err := db.Approvals(ctx, store.ApprovalUsed, 0)
	if err != nil || len(list) != 1 {
		t.Errorf("Approvals(used) = %+v, %v", list, err)
	}
	if list, _ := db.Approvals(ctx, store.ApprovalPending, 0); len(list) != 0 {
		t.Errorf("Approvals(pending) = %+v", list)
	}
}
