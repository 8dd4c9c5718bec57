package config

import "strings"

// NormalizeCommand gives a stdio server defined at run time (REST API,
// CLI, dashboard) the shorthand a config file has: a command written as one
// line with no args is split into the program and its arguments as sh
// would split it; a line that needs a shell to mean what it says (a pipe, a
// redirection, a substitution) is refused, since the gateway runs the
// program itself. The error names the field.
func (s *Server) NormalizeCommand() error {
	if len(s.Args) > 0 || s.Command == "" || !strings.ContainsAny(s.Command, " \t\r\n'\"\\|&;<>()$`#") {
		return nil
	}
	words, err := splitCommand(s.Command)
	switch {
	case err != nil:
		return s.problemsError([]problem{{"command", err.Error()}})
	case len(words) == 0:
		return s.problemsError([]problem{{"command", "command is empty once split into words"}})
	}
	s.Command, s.Args = words[0], words[1:]
	return nil
}

// RedactedValue is what a view of a definition shows in place of a secret
// value ([Server.Redacted]). A definition sent back for an update with a
// value equal to it keeps the value it had.
const RedactedValue = redactedValue
