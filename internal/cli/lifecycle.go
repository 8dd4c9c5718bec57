package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/switchboard-mcp/switchboard/internal/api"
	"github.com/switchboard-mcp/switchboard/internal/apiclient"
)

// tracker prints seed 002's step-by-step progress: one line per finished
// step, "✓ name: detail (12 ms)" or "✗ name: why (12 ms)". Nothing is printed
// for a step in progress, so output piped to a file holds only outcomes.
type tracker struct {
	w     io.Writer
	color bool
	name  string
	began time.Time
}

func (t *tracker) begin(name string) {
	t.name, t.began = name, time.Now()
}

func (t *tracker) line(mark, color, detail string) {
	if t.color {
		mark = color + mark + colorReset
	}
	if detail != "" {
		detail = ": " + detail
	}
	fmt.Fprintf(t.w, "%s %s%s (%s)\n", mark, t.name, detail, stepMillis(time.Since(t.began)))
}

// done prints the current step as finished.
func (t *tracker) done(detail string) { t.line("✓", colorGreen, detail) }

// fail prints the current step as failed and returns the error that ends
// the command with status 1 (the ✗ line already said why).
func (t *tracker) fail(why string) error {
	t.line("✗", colorRed, why)
	return exitError{code: ExitFailure}
}

// lifecycle runs start, stop, restart and discover against one server.
type lifecycle struct {
	r       *remote
	c       *apiclient.Client
	t       *tracker
	timeout time.Duration
}

func newLifecycle(e *env, verb string) *cobra.Command {
	r := &remote{e: e}
	var timeout time.Duration
	short := map[string]string{
		"start":    "Connect a server, step by step: validate, start, initialize + list tools, healthy",
		"stop":     "Drain and disconnect a server, step by step",
		"restart":  "Stop, then start a server, step by step",
		"discover": "Re-list a server's tools, resources and prompts now",
	}[verb]
	cmd := &cobra.Command{
		Use:   verb + " <server>",
		Short: short,
		Long: short + `.

Progress follows the gateway's event stream (GET /api/v1/events, admin only):
each step prints a ✓ line with its time, or a ✗ line with the server's error,
and the command exits 1 on failure or when --timeout passes.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, a []string) error {
			if timeout <= 0 {
				return usageError{errors.New("--timeout must be positive")}
			}
			c, err := r.client()
			if err != nil {
				return err
			}
			l := &lifecycle{r: r, c: c, t: &tracker{w: e.stdout, color: r.color()}, timeout: timeout}
			ctx, cancel := context.WithTimeout(cmdContext(cmd), timeout)
			defer cancel()
			s, err := l.validate(ctx, a[0])
			if err != nil {
				return l.timedOut(ctx, err)
			}
			switch verb {
			case "start":
				err = l.start(ctx, s)
			case "stop":
				err = l.stop(ctx, s)
			case "restart":
				if err = l.stop(ctx, s); err == nil {
					err = l.start(ctx, api.Server{Name: s.Name, Status: "DISCONNECTED"})
				}
			case "discover":
				err = l.discover(ctx, s)
			}
			return l.timedOut(ctx, err)
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 60*time.Second, "give up after this long")
	r.register(cmd)
	return cmd
}

// timedOut turns the deadline into a ✗ line for the step in progress.
func (l *lifecycle) timedOut(ctx context.Context, err error) error {
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) && !errors.As(err, new(exitError)) {
		return l.t.fail(fmt.Sprintf("timed out after %s", l.timeout))
	}
	return err
}

// stepErr ends the current step on err: the gateway's own refusals get a ✗
// line; transport failures (unreachable gateway) are returned as they are,
// for the one-line message.
func (l *lifecycle) stepErr(err error) error {
	var ae *apiclient.Error
	if errors.As(err, &ae) {
		return l.t.fail(explain(err, "this step").Error())
	}
	return err
}

func (l *lifecycle) validate(ctx context.Context, name string) (api.Server, error) {
	l.t.begin("validate")
	s, err := l.c.Server(ctx, name)
	if err != nil {
		return s, l.stepErr(err)
	}
	l.t.done("")
	return s, nil
}

func serving(status string) bool { return status == "CONNECTED" || status == "DEGRADED" }

// subscribe opens the event stream before the action it watches, so no
// event of the action can be missed.
func (l *lifecycle) subscribe(ctx context.Context) (<-chan apiclient.Event, error) {
	evs, err := l.c.Events(ctx)
	if err != nil {
		return nil, l.stepErr(err)
	}
	return evs, nil
}

func (l *lifecycle) start(ctx context.Context, s api.Server) error {
	if serving(s.Status) {
		l.t.begin("start")
		l.t.done(fmt.Sprintf("already %s, %d tools", s.Status, s.ToolCount))
		return nil
	}
	l.t.begin("start")
	evs, err := l.subscribe(ctx)
	if err != nil {
		return err
	}
	if _, err := l.c.ConnectServer(ctx, s.Name, false); err != nil {
		return l.stepErr(err)
	}
	const (
		starting = iota
		initializing
		checking
	)
	phase := starting
	tools := -1
	// advance finishes the steps before target.
	advance := func(target int) {
		if phase == starting && target > starting {
			l.t.done("")
			l.t.begin("initialize + list tools")
			phase = initializing
		}
		if phase == initializing && target > initializing {
			detail := ""
			if tools >= 0 {
				detail = fmt.Sprintf("%d tools", tools)
			}
			l.t.done(detail)
			l.t.begin("healthy")
			phase = checking
		}
	}
	for {
		var ev apiclient.Event
		var ok bool
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev, ok = <-evs:
		}
		if !ok {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return l.t.fail("the gateway's event stream ended")
		}
		switch ev.Type {
		case apiclient.EventsDropped:
			// Missed events: ask for the state instead.
			cur, err := l.c.Server(ctx, s.Name)
			if err != nil {
				return l.stepErr(err)
			}
			if serving(cur.Status) {
				tools = cur.ToolCount
				advance(checking)
				return l.healthy(ctx, cur.Name)
			}
			if cur.Status == "ERROR" {
				return l.t.fail(orDash(cur.ErrorMessage))
			}
		case "server.discovered":
			var d apiclient.Discovered
			if ev.Decode(&d) != nil || d.Server != s.Name {
				continue
			}
			tools = d.Tools
			if d.Rejected > 0 {
				defer fmt.Fprintf(l.r.e.stderr, "switchboard: %d items of %s were rejected: see \"switchboard tools --server %s -o json\"\n", d.Rejected, s.Name, s.Name)
			}
			advance(checking)
		case "server.status_changed":
			var sc apiclient.StatusChanged
			if ev.Decode(&sc) != nil || sc.Server != s.Name {
				continue
			}
			switch sc.To {
			case "CONNECTING":
				advance(initializing)
			case "CONNECTED", "DEGRADED":
				advance(checking)
				return l.healthy(ctx, s.Name)
			case "ERROR":
				return l.t.fail(orDash(sc.Error))
			case "NEEDS_AUTH":
				return l.t.fail("needs authorization: " + orDash(sc.Error))
			case "DISCONNECTED":
				if phase > starting {
					return l.t.fail("disconnected" + suffix(sc.Error))
				}
			}
		}
	}
}

func suffix(why string) string {
	if why == "" {
		return ""
	}
	return ": " + why
}

// healthy reads the server once it is up: CONNECTED passes, DEGRADED
// (serving, but its checks fail) does not.
func (l *lifecycle) healthy(ctx context.Context, name string) error {
	cur, err := l.c.Server(ctx, name)
	if err != nil {
		return l.stepErr(err)
	}
	var detail []string
	if cur.PID > 0 {
		detail = append(detail, fmt.Sprintf("pid %d", cur.PID))
	}
	if cur.Status != "CONNECTED" {
		return l.t.fail(strings.Join(append([]string{cur.Status + suffix(lastError(cur))}, detail...), ", "))
	}
	l.t.done(strings.Join(detail, ", "))
	return nil
}

func (l *lifecycle) stop(ctx context.Context, s api.Server) error {
	l.t.begin("drain + disconnect")
	if s.Status == "DISCONNECTED" {
		l.t.done("already DISCONNECTED")
		return nil
	}
	evs, err := l.subscribe(ctx)
	if err != nil {
		return err
	}
	res, err := l.c.DisconnectServer(ctx, s.Name)
	if err != nil {
		return l.stepErr(err)
	}
	l.t.done(plural(res.PendingRequests, "call") + " in flight")
	l.t.begin("stopped")
	if res.Status == "DISCONNECTED" {
		l.t.done("")
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev, ok := <-evs:
			if !ok {
				return l.t.fail("the gateway's event stream ended")
			}
			if ev.Type == apiclient.EventsDropped {
				cur, err := l.c.Server(ctx, s.Name)
				if err != nil {
					return l.stepErr(err)
				}
				if cur.Status == "DISCONNECTED" {
					l.t.done("")
					return nil
				}
				continue
			}
			var sc apiclient.StatusChanged
			if ev.Type != "server.status_changed" || ev.Decode(&sc) != nil || sc.Server != s.Name {
				continue
			}
			if sc.To == "DISCONNECTED" {
				l.t.done("")
				return nil
			}
		}
	}
}

func (l *lifecycle) discover(ctx context.Context, s api.Server) error {
	l.t.begin("list tools")
	if !serving(s.Status) {
		return l.t.fail(fmt.Sprintf("%s is %s: start it with \"switchboard start %s\"", s.Name, s.Status, s.Name))
	}
	evs, err := l.subscribe(ctx)
	if err != nil {
		return err
	}
	res, err := l.c.DiscoverServer(ctx, s.Name)
	if err != nil {
		return l.stepErr(err)
	}
	// The gateway publishes server.discovered before it answers, so the
	// event is already on its way; its counts are the catalog's.
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev, ok := <-evs:
			if !ok || ev.Type == apiclient.EventsDropped {
				l.t.done(plural(res.ToolCount, "tool"))
				return nil
			}
			var d apiclient.Discovered
			if ev.Type != "server.discovered" || ev.Decode(&d) != nil || d.Server != s.Name {
				continue
			}
			detail := plural(d.Tools, "tool")
			if d.Resources > 0 || d.Prompts > 0 {
				detail += ", " + plural(d.Resources, "resource") + ", " + plural(d.Prompts, "prompt")
			}
			if d.Rejected > 0 {
				detail += fmt.Sprintf(" (%d rejected)", d.Rejected)
			}
			l.t.done(detail)
			return nil
		}
	}
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
