package upstream

import (
	"errors"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/config"
)

// classicProtocol is the newest revision with sessions and server-initiated
// requests, what protocol_version auto asks for.
const classicProtocol = "2025-11-25"

// sessionOptions is what the gateway asks a server for (protocol_version).
//
// auto asks for 2025-11-25, from evidence: a server written the classic way
// (a tool that calls CreateMessage or Elicit while serving a call) fails
// under 2026-07-28, where servers may not send requests of their own, yet
// works for every classic client that calls it directly; and a 2026-07-28
// server built on an SDK that speaks both (go-sdk v1.8) fulfills the input
// requests its tools return through server-initiated requests on a classic
// session, which the gateway relays. So 2025-11-25 is never worse than a
// direct classic client; 2026-07-28 is asked for only when configured, or
// when the server refused the classic handshake ([supervisor.noteHandshakeRefused]).
//
// Over sse and http, auto leaves the choice to the SDK's negotiation: the
// server's handler decides, as it does for a direct client (a stateful one
// speaks 2025-11-25, with server-initiated requests; a stateless one cannot
// send a request of its own to anyone).
func (s *supervisor) sessionOptions() *mcp.ClientSessionOptions {
	v := s.cfg.ProtocolVersion
	if v == "" || v == config.ProtocolAuto {
		if s.cfg.Transport != config.TransportStdio || s.askNewest.Load() {
			return nil // the SDK's newest, server/discover first
		}
		v = classicProtocol
	}
	return &mcp.ClientSessionOptions{ProtocolVersion: v}
}

// noteHandshakeRefused switches an auto server to the newest revision when
// it refused the 2025-11-25 handshake as a server of the new revision only
// would: an unsupported protocol version or no initialize method. The
// supervisor's next attempt then asks for the newest.
func (s *supervisor) noteHandshakeRefused(err error) {
	if v := s.cfg.ProtocolVersion; v != "" && v != config.ProtocolAuto {
		return
	}
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) {
		return
	}
	switch rpcErr.Code {
	case mcp.CodeUnsupportedProtocolVersion, jsonrpc.CodeMethodNotFound:
		if !s.askNewest.Swap(true) {
			s.log.Info("upstream refused the 2025-11-25 handshake; asking for the newest revision", "error", err)
		}
	}
}

// peerSessionOptions is what a session of a peer's own asks for. Under auto a
// classic client's session asks for 2025-11-25, whatever the server's
// newest: a server that speaks both revisions then serves it as it serves
// that client directly (a tool that sends requests of its own works), and a
// stateless caller's session (one per call in flight to a classic server, pooled per client) asks for
// 2025-11-25 for the same reason.
func (s *supervisor) peerSessionOptions() *mcp.ClientSessionOptions {
	v := s.cfg.ProtocolVersion
	if v != "" && v != config.ProtocolAuto {
		return &mcp.ClientSessionOptions{ProtocolVersion: v}
	}
	if s.askNewest.Load() {
		return nil
	}
	return &mcp.ClientSessionOptions{ProtocolVersion: classicProtocol}
}
