package api

import (
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/invoke"
	"github.com/switchboard-mcp/switchboard/internal/telemetry"
)

func TestTimeseriesRoute(t *testing.T) {
	ts := telemetry.NewTimeSeries(nil)
	for i := range 50 {
		ts.Record("demo", "demo.echo", i%10 == 0, time.Duration(i)*time.Millisecond)
	}
	h := as(New(&fakeServers{}, catalog.New(nil), &fakeCaller{}, &Options{Series: ts}), &adminID)
	bad := string(invoke.CodeInvalidArgument)
	tests := []struct {
		name, query string
		status      int
		code, param string
		points      int // of the gateway's series, when 200
	}{
		{"defaults: an hour in 120 points", "", 200, "", "", 120},
		{"a window and a step", "?window=5m&step=5s", 200, "", "", 60},
		{"one server", "?server=demo&top=1", 200, "", "", 0},
		{"unparsable window", "?window=soon", 400, bad, "window", 0},
		{"window over an hour", "?window=2h", 400, bad, "window", 0},
		{"step not whole seconds", "?step=1500ms", 400, bad, "step", 0},
		{"step longer than window", "?window=1m&step=2m", 400, bad, "step", 0},
		{"negative top", "?top=-1", 400, bad, "top", 0},
		{"unknown server", "?server=zz", 404, CodeServerNotFound, "", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/stats/timeseries"+tc.query, nil))
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.status, rec.Body)
			}
			if tc.status != 200 {
				var e struct {
					Error struct {
						Code    string         `json:"code"`
						Details map[string]any `json:"details"`
					} `json:"error"`
				}
				if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil {
					t.Fatal(err)
				}
				if e.Error.Code != tc.code || (tc.param != "" && e.Error.Details["parameter"] != tc.param) {
					t.Errorf("error %+v, want code %s on parameter %q", e.Error, tc.code, tc.param)
				}
				return
			}
			var a telemetry.SeriesAnswer
			if err := json.Unmarshal(rec.Body.Bytes(), &a); err != nil {
				t.Fatal(err)
			}
			var calls, toolCalls uint64
			for _, s := range a.Series {
				switch s.Scope {
				case "gateway":
					if len(s.Points) != tc.points {
						t.Errorf("gateway: %d points, want %d", len(s.Points), tc.points)
					}
					calls = s.Calls
				case "server":
					if s.Name != "demo" || s.Calls != 50 || s.Errors != 5 {
						t.Errorf("server series %s: %d calls, %d errors; want demo, 50, 5", s.Name, s.Calls, s.Errors)
					}
					calls = s.Calls
				case "tool":
					toolCalls = s.Calls
				}
			}
			if calls != 50 || toolCalls != 50 {
				t.Errorf("calls = %d, tool calls = %d; want 50 each", calls, toolCalls)
			}
		})
	}
}
