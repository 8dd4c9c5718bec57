package api

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
)

// bodyRoutes are the routes that decode a request body.
var bodyRoutes = []struct{ method, path string }{
	{"POST", "/api/v1/aggregator/servers"},
	{"PATCH", "/api/v1/aggregator/servers/demo"},
	{"POST", "/api/v1/tools/call"},
	{"POST", "/api/v1/keys"},
	{"POST", "/api/v1/mcp/register"},
	{"POST", "/api/v1/mcp/invoke"},
	{"POST", "/api/v1/mcp/policies/grant"},
	{"POST", "/api/v1/mcp/tokens"},
	{"POST", "/api/v1/search"},
}

// FuzzRESTBodies sends arbitrary bodies to every route that decodes one, as
// an admin: the answer is never a 5xx, and every error is the API's JSON
// error shape with a code.
func FuzzRESTBodies(f *testing.F) {
	for i := range bodyRoutes {
		for _, b := range []string{``, `{}`, `null`, `[]`, `{"name":"x"}`, `{"name":"demo.echo","arguments":{"a":1},"_meta":{"switchboard/approval-token":"t"}}`,
			`{"tool_name":"demo.echo","params":[1]}`, `{"agent_id":"a","tool_name":"demo.*","expires_at":"yesterday"}`,
			`{"name":"x","transport_type":"STDIO","connection_config":{"command":""}}`, `{"query":"","limit":-1}`,
			`{"default_access":"maybe"}`, `{"name":` + strings.Repeat("[", 2000), `{"a":"\ud800"}`} {
			f.Add(uint8(i), b)
		}
	}
	e := newEnv(f)
	f.Fuzz(func(t *testing.T, route uint8, body string) {
		r := bodyRoutes[int(route)%len(bodyRoutes)]
		req := httptest.NewRequest(r.method, r.path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		as(e.api, &adminID).ServeHTTP(rec, req)
		if rec.Code >= 500 && rec.Code != 501 && rec.Code != 503 {
			t.Fatalf("%s %s %q: status %d: %s", r.method, r.path, body, rec.Code, rec.Body)
		}
		if rec.Code >= 400 {
			var out struct {
				Error struct{ Code, Message string } `json:"error"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Error.Code == "" || out.Error.Message == "" {
				t.Fatalf("%s %s %q: status %d, body not an API error: %s", r.method, r.path, body, rec.Code, rec.Body)
			}
		}
	})
}
