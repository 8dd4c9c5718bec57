package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/telemetry"
)

// TimeSeries answers GET /api/v1/stats/timeseries from the gateway's
// in-memory series. *telemetry.TimeSeries implements it.
type TimeSeries interface {
	Query(q telemetry.SeriesQuery) telemetry.SeriesAnswer
}

// defaultPoints is how many points a window is cut into when no step is
// given: enough for a chart a few hundred pixels wide.
const defaultPoints = 120

// timeseries is GET /api/v1/stats/timeseries?window=1h&step=30s&server=NAME&top=5:
// calls, errors and p50/p95 latency per step for the gateway, the servers
// and the busiest tools.
func (h *handler) timeseries(w http.ResponseWriter, r *http.Request) error {
	if h.series == nil {
		return notConfigured("time series")
	}
	q := r.URL.Query()
	sq := telemetry.SeriesQuery{Window: time.Hour, Top: 5, Server: q.Get("server")}
	if v := q.Get("window"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second || d > telemetry.SeriesWindow {
			return badParam("window", "must be a duration from 1s to 1h, e.g. 5m or 1h")
		}
		sq.Window = d
	}
	sq.Step = max(sq.Window/defaultPoints, time.Second).Truncate(time.Second)
	if v := q.Get("step"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second || d%time.Second != 0 {
			return badParam("step", "must be a whole number of seconds, e.g. 10s")
		}
		if d > sq.Window {
			return badParam("step", "must not be longer than the window")
		}
		if sq.Window/d > 3600 {
			return badParam("step", "cuts the window into more than 3600 points")
		}
		sq.Step = d
	}
	if v := q.Get("top"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 50 {
			return badParam("top", "must be a number from 0 to 50")
		}
		sq.Top = n
	}
	if sq.Server != "" && h.servers != nil {
		if _, err := h.servers.Get(r.Context(), sq.Server); err != nil {
			return err
		}
	}
	writeJSON(w, http.StatusOK, h.series.Query(sq))
	return nil
}
