package app

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/escalation"
)

// newEscalation builds the escalation service (docs/escalation.md): its
// webhook passes the SSRF guard like every other outbound URL, and its
// headers are read from the environment here, once, so that no secret sits
// in the config or reaches a log.
func (a *App) newEscalation(s config.Settings, getenv func(string) string) (*escalation.Service, error) {
	if err := checkConfiguredURL(a.guard, "settings.escalation_webhook_url", s.EscalationWebhookURL); err != nil {
		return nil, err
	}
	header := http.Header{}
	for _, h := range s.EscalationWebhookHeaders {
		name, env, _ := strings.Cut(h, "=") // the config checked the shape
		v := getenv(env)
		if v == "" {
			return nil, fmt.Errorf("settings.escalation_webhook_headers: header %s: environment variable %s is not set", name, env)
		}
		header.Set(name, v)
	}
	return escalation.New(a.db, &escalation.Options{
		WebhookURL:  s.EscalationWebhookURL,
		Header:      header,
		Events:      s.EscalationEvents,
		Client:      a.guard.Client(10 * time.Second),
		Tokens:      a.sec.engine,
		ApprovalTTL: s.ApprovalTTL,
		OnEvent:     a.events.Publish,
		Logger:      a.logger.With("component", "escalation"),
	}), nil
}
