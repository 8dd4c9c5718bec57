package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// streamEvents serves the gateway's events as Server-Sent Events
// (`event: <type>`, `id: <seq>`, `data: <json>`) until the client leaves.
// A client too slow to keep up gets an `events.dropped` event saying how
// many it missed, rather than slowing the gateway down.
func (h *handler) streamEvents(w http.ResponseWriter, r *http.Request) error {
	if h.events == nil {
		return &Error{Status: http.StatusNotFound, Code: CodeNotFound, Message: "events are not enabled"}
	}
	rc := http.NewResponseController(w)
	sub := h.events.Subscribe(0)
	defer sub.Close()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	// A comment right away, so clients and proxies see the stream is open.
	if _, err := fmt.Fprint(w, ": switchboard events\n\n"); err != nil {
		return nil
	}
	_ = rc.Flush()
	keepalive := time.NewTicker(25 * time.Second)
	defer keepalive.Stop()
	for {
		select {
		case <-r.Context().Done():
			return nil
		case <-keepalive.C:
			if _, err := fmt.Fprint(w, ": keepalive\n\n"); err != nil {
				return nil
			}
		case ev, ok := <-sub.C:
			if !ok {
				return nil
			}
			if n := sub.Dropped(); n > 0 {
				fmt.Fprintf(w, "event: events.dropped\ndata: {\"dropped\":%d}\n\n", n)
			}
			data, err := json.Marshal(ev)
			if err != nil {
				continue
			}
			if _, err := fmt.Fprintf(w, "event: %s\nid: %d\ndata: %s\n\n", ev.Type, ev.Seq, data); err != nil {
				return nil
			}
		}
		if err := rc.Flush(); err != nil {
			return nil
		}
	}
}
