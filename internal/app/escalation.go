package app

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/netguard"
	"github.com/switchboard-mcp/switchboard/internal/store"
	"github.com/switchboard-mcp/switchboard/internal/telemetry"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/escalation"
)

// newEscalation builds the escalation service (docs/escalation.md): its
// webhook passes the SSRF guard like every other outbound URL, and its
// headers are read from the environment here, once, so that no secret sits
// in the config or reaches a log.
func newEscalation(s config.Settings, getenv func(string) string, guard *netguard.Guard, db *store.DB,
	tokens escalation.TokenIssuer, events *telemetry.Bus, logger *slog.Logger) (*escalation.Service, error) {
	if err := guard.CheckConfigured("settings.escalation_webhook_url", s.EscalationWebhookURL); err != nil {
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
	return escalation.New(db, &escalation.Options{
		WebhookURL:  s.EscalationWebhookURL,
		Header:      header,
		Events:      s.EscalationEvents,
		Client:      guard.Client(10 * time.Second),
		Tokens:      tokens,
		ApprovalTTL: s.ApprovalTTL,
		OnEvent:     events.Publish,
		Logger:      logger.With("component", "escalation"),
	}), nil
}
