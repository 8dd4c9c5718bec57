package config

import (
	"errors"
	"fmt"
	"strings"
)

// applyShorthands fills in what a seed 002 definition leaves implicit, so a
// file written against the seed runs as written:
//
//   - no transport, a command and no url: the server is stdio (seed 002's
//     servers are all processes);
//   - a command written as one string and no args key: the string is split
//     into the program and its arguments the way sh would split it
//     ("npx -y @scope/pkg /srv/data").
//
// It returns the problems found (an unterminated quote, shell syntax that
// needs a shell to run).
func (s *Server) applyShorthands() []problem {
	if s.Transport == "" && s.Command != "" && s.URL == "" {
		s.Transport = TransportStdio
	}
	_, hasArgs := s.Pos["args"]
	if hasArgs || len(s.Args) > 0 || s.Command == "" || !strings.ContainsAny(s.Command, " \t\r\n'\"\\") {
		return nil
	}
	words, err := splitCommand(s.Command)
	if err != nil {
		return []problem{{"command", err.Error()}}
	}
	if len(words) == 0 {
		return []problem{{"command", "command is empty once split into words"}}
	}
	s.Command, s.Args = words[0], words[1:]
	if p, ok := s.Pos["command"]; ok {
		for i := range s.Args {
			s.Pos[fmt.Sprintf("args[%d]", i)] = p
		}
	}
	return nil
}

// errNeedsShell explains characters that only a shell gives meaning to: the
// gateway starts the program itself, without a shell, so passing them on as
// arguments would not do what the line says.
var errNeedsShell = errors.New("needs a shell to mean what it says (pipes, redirections, " +
	"substitutions, comments and command lists are not run): quote the character, give the words as args, " +
	"or run a shell explicitly (command: sh, args: [-c, \"...\"])")

// splitCommand splits a command line into words as a POSIX shell does:
// blanks separate words; 'single quotes' keep everything; "double quotes"
// keep everything but backslash, which escapes $ ` " \ and newline there; an
// unquoted backslash escapes the next character. Nothing is expanded:
// variables, command substitutions, operators (| & ; < > ( )) and a # that
// starts a word are refused with errNeedsShell rather than passed on.
func splitCommand(line string) ([]string, error) {
	var (
		words  []string
		cur    strings.Builder
		inWord bool
	)
	end := func() {
		if inWord {
			words = append(words, cur.String())
			cur.Reset()
			inWord = false
		}
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			end()
		case c == '\\':
			if i+1 >= len(line) {
				return nil, errors.New("ends with a backslash that escapes nothing")
			}
			i++
			if line[i] != '\n' { // backslash-newline continues the line
				cur.WriteByte(line[i])
				inWord = true
			}
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unterminated single quote at offset %d", i)
			}
			cur.WriteString(line[i+1 : i+1+j])
			inWord = true
			i += 1 + j
		case c == '"':
			start := i
			inWord = true
			for i++; ; i++ {
				if i >= len(line) {
					return nil, fmt.Errorf("unterminated double quote at offset %d", start)
				}
				d := line[i]
				if d == '"' {
					break
				}
				if d == '$' || d == '`' {
					return nil, fmt.Errorf("%q inside double quotes at offset %d %w", d, i, errNeedsShell)
				}
				if d == '\\' && i+1 < len(line) && strings.IndexByte("$`\"\\\n", line[i+1]) >= 0 {
					i++
					if line[i] != '\n' {
						cur.WriteByte(line[i])
					}
					continue
				}
				cur.WriteByte(d)
			}
		case strings.IndexByte("|&;<>()$`", c) >= 0, c == '#' && !inWord:
			return nil, fmt.Errorf("%q at offset %d %w", c, i, errNeedsShell)
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	end()
	return words, nil
}
