package apiclient

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Event is one gateway event from GET /api/v1/events. Data stays raw so
// each consumer decodes only the types it follows (see [Event.Decode]).
type Event struct {
	Seq  uint64          `json:"seq"`
	Type string          `json:"type"` // "server.status_changed", "server.discovered", "invocation.completed", ...
	At   time.Time       `json:"at"`
	Data json.RawMessage `json:"data,omitempty"`
}

// Decode unmarshals the event's payload into v.
func (e Event) Decode(v any) error {
	if len(e.Data) == 0 {
		return fmt.Errorf("event %s has no data", e.Type)
	}
	if err := json.Unmarshal(e.Data, v); err != nil {
		return fmt.Errorf("decoding event %s: %w", e.Type, err)
	}
	return nil
}

// Payloads of the events the CLI follows.
type (
	// StatusChanged is the data of "server.status_changed".
	StatusChanged struct {
		Server string    `json:"server"`
		From   string    `json:"from"`
		To     string    `json:"to"`
		Error  string    `json:"error"`
		At     time.Time `json:"at"`
	}
	// Discovered is the data of "server.discovered".
	Discovered struct {
		Server    string `json:"server"`
		Tools     int    `json:"tools"`
		Rejected  int    `json:"rejected"`
		Resources int    `json:"resources"`
		Prompts   int    `json:"prompts"`
	}
	// InvocationCompleted is the data of "invocation.completed".
	InvocationCompleted struct {
		CorrelationID string  `json:"correlation_id"`
		AgentID       string  `json:"agent_id"`
		Server        string  `json:"server"`
		Tool          string  `json:"tool"`
		Status        string  `json:"status"`
		Code          string  `json:"code"`
		Attempts      int     `json:"attempts"`
		ServedBy      string  `json:"served_by"`
		LatencyMS     float64 `json:"latency_ms"`
	}
)

// EventsDropped is the type of the event the gateway sends in place of
// events a slow reader missed; its data is {"dropped": n}.
const EventsDropped = "events.dropped"

// Events subscribes to the gateway's event stream (admin only). It returns
// once the gateway has accepted the subscription, so every event published
// after the call returns is delivered; the channel is closed when ctx ends
// or the stream breaks. A reader that falls behind blocks the stream, and
// the gateway then drops events for it and says so with [EventsDropped].
func (c *Client) Events(ctx context.Context) (<-chan Event, error) {
	req, err := c.newRequest(ctx, "GET", "/api/v1/events", nil, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.send(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, readError(resp)
	}
	ch := make(chan Event, 64)
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		var typ string
		var data strings.Builder
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if data.Len() > 0 {
					ev, ok := parseEvent(typ, data.String())
					if ok {
						select {
						case ch <- ev:
						case <-ctx.Done():
							return
						}
					}
				}
				typ = ""
				data.Reset()
			case strings.HasPrefix(line, ":"):
				// comment or keepalive
			case strings.HasPrefix(line, "event:"):
				typ = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
			case strings.HasPrefix(line, "data:"):
				if data.Len() > 0 {
					data.WriteByte('\n')
				}
				data.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
			}
		}
	}()
	return ch, nil
}

// parseEvent reads one SSE message: the data is the whole event envelope,
// except for events.dropped, whose data is its payload.
func parseEvent(typ, data string) (Event, bool) {
	if typ == EventsDropped {
		return Event{Type: typ, Data: json.RawMessage(data)}, true
	}
	var ev Event
	if json.Unmarshal([]byte(data), &ev) != nil {
		return Event{}, false
	}
	if ev.Type == "" {
		ev.Type = typ
	}
	return ev, true
}
