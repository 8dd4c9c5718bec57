package invoke

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/audit"
	"github.com/switchboard-mcp/switchboard/internal/authz"
	"github.com/switchboard-mcp/switchboard/internal/store"
)

// storeSink writes audit records to a real store, as the gateway does.
type storeSink struct{ db *store.DB }

func (s storeSink) WriteAudit(ctx context.Context, recs []audit.Record) error {
	rows := make([]store.Invocation, len(recs))
	for i, r := range recs {
		rows[i] = store.Invocation(r)
	}
	return s.db.InsertInvocations(ctx, rows)
}

func (s storeSink) PurgeAudit(ctx context.Context, before time.Time) (int64, error) {
	return s.db.PurgeInvocations(ctx, before)
}

// inlineRecorder hides the recorder's deferred methods, so the pipeline
// hashes and summarizes on the call's path, as it did before issue 18.
type inlineRecorder struct{ r *audit.Recorder }

func (i inlineRecorder) Record(rec audit.Record) bool { return i.r.Record(rec) }
func (i inlineRecorder) RecordSync(ctx context.Context, rec audit.Record) error {
	return i.r.RecordSync(ctx, rec)
}

// Secrets planted in the calls below; no audit row may hold one.
var plantedSecrets = []string{"hunter2", "sk-live-123", "tok-7", "Bearer abc", "s3cr3t"}

// auditRowCalls are calls covering every kind of audit row an invocation
// writes, with secrets in arguments and results.
func auditRowCalls() []Call {
	ok := authz.Identity{ID: "key:ok", AgentID: "ok"}
	return []Call{
		{Name: "a.read", Identity: ok, CorrelationID: "c-secrets", TicketID: "T-1", TaskID: "K-1",
			Arguments: json.RawMessage(`{"query":"q","connection":{"password":"hunter2","user":"app"},` +
				`"options":{"auth":{"api_key":"sk-live-123","Authorization":"Bearer abc"}},"b":[1,2.50,{"z":null}]}`)},
		{Name: "a.read", Identity: ok, CorrelationID: "c-same-secrets-other-values",
			Arguments: json.RawMessage(`{"b":[1,2.50,{"z":null}],"options":{"auth":{"Authorization":"x","api_key":"y"}},` +
				`"connection":{"user":"app","password":"other"},"query":"q"}`)},
		{Name: "a.read", Identity: ok, CorrelationID: "c-no-args"},
		{Name: "a.write", Identity: ok, CorrelationID: "c-tool-error", Arguments: json.RawMessage(`{"token":"s3cr3t"}`)},
		{Name: "a.put", Identity: ok, CorrelationID: "c-large", IdempotencyKey: "idem-1"},
		{Name: "b.read", Identity: ok, CorrelationID: "c-unavailable", Arguments: json.RawMessage(`{"x":1}`)},
		{Name: "a.read", Identity: authz.Identity{ID: "key:no", AgentID: "no"}, CorrelationID: "c-denied",
			Arguments: json.RawMessage(`{"secret":"s3cr3t"}`)},
		{Name: "a.nope", Identity: ok, CorrelationID: "c-unknown", Arguments: json.RawMessage(`{"password":"hunter2"}`)},
	}
}

// auditRowUpstream answers the calls of auditRowCalls.
func auditRowUpstream() *scripted {
	doc := `{"items":[{"id":1,"session_token":"tok-7","name":"n"}],"password":"hunter2"}`
	return newScripted(func(server, tool string, _ int) (*mcp.CallToolResult, error) {
		switch server + "." + tool {
		case "a.read":
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: doc}},
				StructuredContent: json.RawMessage(doc)}, nil
		case "a.write":
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "disk full"}}}, nil
		case "a.put":
			return text(strings.Repeat("x", summaryInputMax)), nil
		}
		return nil, notSent
	})
}

// runAuditRows makes the calls through a pipeline recording durably with
// rec into db, checking after each call that its row is already stored,
// and returns the rows, oldest first.
func runAuditRows(t *testing.T, db *store.DB, rec Recorder) []store.Invocation {
	t.Helper()
	red, err := audit.NewRedactor(nil)
	if err != nil {
		t.Fatal(err)
	}
	p := New(pipelineCatalog(t), auditRowUpstream(), &Options{Retry: fastRetry, Authorizer: &denyAll{},
		Recorder: rec, Redactor: red, DurableAudit: true})
	for i, c := range auditRowCalls() {
		p.CallTool(t.Context(), c) //nolint:errcheck // failures are rows too
		// Durable: the row is in the store when the call returns.
		n, err := db.CountInvocations(t.Context(), store.InvocationFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if n != int64(i+1) {
			t.Fatalf("after call %q: %d rows stored, want %d", c.CorrelationID, n, i+1)
		}
	}
	rows, _, err := db.QueryInvocations(t.Context(), store.InvocationFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	// Newest first; make them comparable: the ids and times are the
	// run's own.
	for i, j := 0, len(rows)-1; i < j; i, j = i+1, j-1 {
		rows[i], rows[j] = rows[j], rows[i]
	}
	for i := range rows {
		rows[i].ID, rows[i].InvokedAt, rows[i].LatencyMS = "", time.Time{}, 0
	}
	return rows
}

func openAuditStore(t *testing.T) *store.DB {
	t.Helper()
	db, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "audit.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestAuditRowsUnchangedByDeferral shows that deriving the params hash and
// result summary on the recorder's writer stores the same rows as deriving
// them on the call's path did, that a durable call still returns only once
// its row is stored, and that no secret reaches a row. (The redactor itself
// is compared with its former implementation in internal/audit.)
func TestAuditRowsUnchangedByDeferral(t *testing.T) {
	record := func(db *store.DB) *audit.Recorder {
		r := audit.NewRecorder(storeSink{db}, &audit.Options{FlushInterval: time.Hour})
		t.Cleanup(func() { r.Close(context.Background()) })
		return r
	}
	inlineDB, deferredDB := openAuditStore(t), openAuditStore(t)
	inline := runAuditRows(t, inlineDB, inlineRecorder{record(inlineDB)})
	deferred := runAuditRows(t, deferredDB, record(deferredDB))
	if diff := cmp.Diff(inline, deferred); diff != "" {
		t.Errorf("rows with hashing and summarizing deferred differ (-inline +deferred):\n%s", diff)
	}

	byID := map[string]store.Invocation{}
	for _, r := range deferred {
		byID[r.CorrelationID] = r
		v := reflect.ValueOf(r)
		for i := range v.NumField() {
			if f, ok := v.Field(i).Interface().(string); ok {
				for _, secret := range plantedSecrets {
					if strings.Contains(f, secret) {
						t.Errorf("row %q field %s holds the secret %q: %q", r.CorrelationID, v.Type().Field(i).Name, secret, f)
					}
				}
			}
		}
	}
	hash := func(canonical string) string {
		sum := sha256.Sum256([]byte(canonical))
		return hex.EncodeToString(sum[:])
	}
	// The documented params_hash: SHA-256 of the redacted arguments in
	// canonical JSON (keys sorted, numbers as written); none hash as {}.
	wantSecretsHash := hash(`{"b":[1,2.50,{"z":null}],"connection":{"password":"[REDACTED]","user":"app"},` +
		`"options":{"auth":{"Authorization":"[REDACTED]","api_key":"[REDACTED]"}},"query":"q"}`)
	for id, want := range map[string]string{
		"c-secrets":                   wantSecretsHash,
		"c-same-secrets-other-values": wantSecretsHash, // the hash neither changes with nor reveals a secret
		"c-no-args":                   hash(`{}`),
		"c-tool-error":                hash(`{"token":"[REDACTED]"}`),
		"c-denied":                    hash(`{"secret":"[REDACTED]"}`),
		"c-unknown":                   hash(`{"password":"[REDACTED]"}`),
	} {
		if got := byID[id].ParamsHash; got != want {
			t.Errorf("row %q params_hash = %s, want %s", id, got, want)
		}
	}
	wantSummary := `{"content":[{"text":"{\"items\":[{\"id\":1,\"name\":\"n\",\"session_token\":\"[REDACTED]\"}],\"password\":\"[REDACTED]\"}",` +
		`"type":"text"}],"structuredContent":{"items":[{"id":1,"name":"n","session_token":"[REDACTED]"}],"password":"[REDACTED]"}}`
	large, err := json.Marshal(text(strings.Repeat("x", summaryInputMax)))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		id                     string
		summary, code, errText string
		success                bool
	}{
		{id: "c-secrets", summary: wantSummary, success: true},
		{id: "c-tool-error", summary: `{"content":[{"text":"disk full","type":"text"}],"isError":true}`, code: "tool_error", errText: "disk full"},
		{id: "c-large", summary: fmt.Sprintf("(a %d-byte result, not summarized)", len(large)), success: true},
		{id: "c-unavailable", code: string(CodeServerUnavailable)},
		{id: "c-denied", code: string(CodeDenied)},
		{id: "c-unknown", code: string(CodeToolNotFound)},
	} {
		r := byID[tt.id]
		if r.ResultSummary != tt.summary || r.ErrorCode != tt.code || r.Success != tt.success ||
			(tt.errText != "" && r.Error != tt.errText) {
			t.Errorf("row %q: summary %q, code %q, error %q, success %v; want %q, %q, %q, %v",
				tt.id, r.ResultSummary, r.ErrorCode, r.Error, r.Success, tt.summary, tt.code, tt.errText, tt.success)
		}
	}
}

// TestAuditInputsAreCopies checks that what the writer derives from
// cannot change under it: a caller reusing its argument buffer, or changing
// the result it got back, once the call moved on.
func TestAuditInputsAreCopies(t *testing.T) {
	red, err := audit.NewRedactor(nil)
	if err != nil {
		t.Fatal(err)
	}
	p := New(pipelineCatalog(t), nil, &Options{Redactor: red})
	wantHash := red.ParamsHash(json.RawMessage(`{"a":1}`))
	const wantSummary = `{"content":[{"text":"before","type":"text"}]}`
	for _, tt := range []struct {
		name string
		// derivedFirst: the writer derives while the call waits (durable
		// audit); otherwise the call moves on first (async audit, or a
		// durable call that gave up waiting).
		derivedFirst bool
	}{{"derived while the call waits", true}, {"call moved on first", false}} {
		t.Run(tt.name, func(t *testing.T) {
			args := []byte(`{"a":1}`)
			res := text("before")
			a := p.auditInputs(args, res, true)
			var rec audit.Record
			if tt.derivedFirst {
				a.derive(&rec)
			}
			a.release()
			if a.result != nil {
				t.Error("the inputs still hold the result after release")
			}
			copy(args, `{"b":2}`)
			res.Content[0].(*mcp.TextContent).Text = "after"
			if !tt.derivedFirst {
				a.derive(&rec)
			}
			if rec.ParamsHash != wantHash {
				t.Errorf("params_hash follows the caller's buffer: %s, want %s", rec.ParamsHash, wantHash)
			}
			if rec.ResultSummary != wantSummary {
				t.Errorf("summary = %q, want %q", rec.ResultSummary, wantSummary)
			}
		})
	}
}

// TestMarshalResultIsMarshal pins marshalResult to json.Marshal, whose
// length the audit reports for a result too large to summarize.
func TestMarshalResultIsMarshal(t *testing.T) {
	for _, r := range []*mcp.CallToolResult{
		nil,
		text("a <b> & c \u2028 \" \u00e9"),
		{Content: []mcp.Content{&mcp.TextContent{Text: "x"}, &mcp.ImageContent{Data: []byte{0, 1, 2}, MIMEType: "image/png"}},
			StructuredContent: json.RawMessage(` { "b" : [1, 2] , "a":"<&>" } `), IsError: true,
			Meta: mcp.Meta{"k": map[string]any{"z": 1, "a": "\u2029"}}},
		{StructuredContent: map[string]any{"html": "<p>"}},
	} {
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := marshalResult(r)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("marshalResult = %s, %v; json.Marshal = %s", got, err, want)
		}
	}
}
